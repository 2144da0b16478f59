// List the sessions Claude Code offers to resume, with Claude Code's own session list
// (the Agent SDK's `listSessions`, which reads the first and last 64 KiB of each
// `~/.claude/projects/<project>/<sessionId>.jsonl`), and print them as one JSON array
// of {sessionId, summary, customTitle, firstPrompt}.
//
//   node list.mjs SDK_PACKAGE_DIR HOME
//
// The SDK resolves the projects folder from HOME once, so HOME is set before it is
// imported; CLAUDE_CONFIG_DIR is removed so that nothing else moves it. The files are
// only read: the caller checks that they are unchanged.

import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, home] = process.argv.slice(2);
process.env.HOME = home;
delete process.env.CLAUDE_CONFIG_DIR;
const sdk = await import(pathToFileURL(join(packageDir, "sdk.mjs")).href);
const sessions = await sdk.listSessions();
const listed = sessions.map(({ sessionId, summary, customTitle, firstPrompt }) => ({
	sessionId,
	summary,
	customTitle: customTitle ?? null,
	firstPrompt: firstPrompt ?? null,
}));
process.stdout.write(`${JSON.stringify(listed)}\n`);
