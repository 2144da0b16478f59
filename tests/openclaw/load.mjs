// Load sessions from OpenClaw SQLite session stores with OpenClaw's own readers (the
// public export `openclaw/plugin-sdk/agent-sessions`) and print one JSON document: per
// target, the context each reader builds for the model.
//
//   node load.mjs OPENCLAW_INSTALL_DIR [TARGETS.json]
//
// OPENCLAW_INSTALL_DIR holds the node_modules OpenClaw is installed in; the targets are a
// JSON array of {storePath, agentId, sessionId, sessionKey}, read from the file or, with
// none named, from stdin. Both readers only read the store, so the store is left as it
// was; OpenClaw's own state (`$OPENCLAW_STATE_DIR/state/openclaw.sqlite`, created on
// every use) belongs in a temporary directory the caller chooses.
//
// For each target, in order:
//   {target, open: VIEW, modelContext: VIEW}
// where VIEW is {messages, leaf, path, entries} or {error}:
//   open:          SessionManager.open(target) (reads every row), then buildSessionContext()
//   modelContext:  SessionManager.openModelContext(target) (the worker turns' reader),
//                  then buildSessionContext()
//   messages: the context's messages, whole; leaf: the leaf entry id; path: the entry ids
//   from the root to the leaf; entries: how many entries the reader kept (header left out).
// One target that fails gives its error text and the batch goes on.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// OpenClaw may log while it reads; only the result goes to stdout.
const write = process.stdout.write.bind(process.stdout);
process.stdout.write = (...args) => process.stderr.write(...args);
console.log = console.info = console.debug = (...args) => console.error(...args);

function view(open) {
	try {
		const manager = open();
		const context = manager.buildSessionContext();
		return {
			messages: context.messages,
			leaf: manager.getLeafId() ?? null,
			path: manager.getBranch().map((entry) => entry.id),
			entries: manager.getEntries().length,
		};
	} catch (error) {
		return { error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
	}
}

async function main() {
	const [installDir, targetsFile] = process.argv.slice(2);
	const resolve = createRequire(join(installDir, "package.json")).resolve;
	const { SessionManager } = await import(
		pathToFileURL(resolve("openclaw/plugin-sdk/agent-sessions")).href
	);
	const targets = JSON.parse(readFileSync(targetsFile ?? 0, "utf8"));
	const results = targets.map((target) => ({
		target,
		open: view(() => SessionManager.open({ ...target })),
		modelContext: view(() => SessionManager.openModelContext({ ...target })),
	}));
	// JSON.stringify leaves U+2028/U+2029 as they are, which JSON allows.
	write(`${JSON.stringify(results)}\n`, () => process.exit(0));
}

await main();
