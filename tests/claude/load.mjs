// Load Claude Code session files with Claude Code's own session reader (the Agent SDK's
// `getSessionMessages`, which builds the conversation chain the way Claude Code resumes
// it; for a sub-agent's transcript its `getSubagentMessages`) and print, per file, one
// JSON line: the session id the file was stored under and the messages the reader
// returned, in order; or `"error"` when it threw.
//
//   node load.mjs SDK_PACKAGE_DIR < FILES.json
//
// FILES.json is a JSON array of {file} or {file, subagent: {session, agent, main}}: a
// sub-agent's transcript is stored as `<session>/subagents/agent-<agent>.jsonl` beside
// its session's main transcript `<session>.jsonl` (a copy of `main`, or one user record
// where it is null: the reader finds a sub-agent only through its session's file).
//
// The reader finds a session by id under `$HOME/.claude/projects/<project>/`, and
// resolves that folder once per process, so HOME is pointed at a fresh temporary folder
// before the SDK is imported. Each file is copied there in turn as `<sessionId>.jsonl`,
// loaded, checked to be byte-for-byte unchanged (the reader must never write to it) and
// removed again, so that files sharing a session id never meet.

import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// The session id the conversation records carry (the most frequent one on user and
// assistant records, the first seen on a tie; any record's when there is none). The
// reader only accepts a UUID as a session id: a hand-written sample with another id is
// stored under a UUID derived from that id, which the reader never compares with the
// records (it takes the id only from the file name).
function sessionIdOf(bytes) {
	const counts = new Map();
	let fallback = null;
	for (const line of bytes.toString("utf8").split("\n")) {
		let record;
		try {
			record = JSON.parse(line);
		} catch {
			continue;
		}
		if (record === null || typeof record !== "object" || typeof record.sessionId !== "string") continue;
		fallback ??= record.sessionId;
		if (record.type === "user" || record.type === "assistant") {
			counts.set(record.sessionId, (counts.get(record.sessionId) ?? 0) + 1);
		}
	}
	let carried = fallback;
	let most = 0;
	for (const [id, count] of counts) {
		if (count > most) {
			carried = id;
			most = count;
		}
	}
	if (carried !== null && UUID.test(carried)) return { carried, stored: carried };
	const hex = createHash("sha256").update(`sessionfix:${carried}`).digest("hex");
	const stored = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
	return { carried, stored };
}

// A main transcript for a sub-agent's session when the caller has none: one user record.
function stubSession(sessionId) {
	const record = {
		parentUuid: null,
		isSidechain: false,
		type: "user",
		message: { role: "user", content: "stub" },
		uuid: "00000000-0000-4000-8000-000000000000",
		timestamp: "2026-01-01T00:00:00.000Z",
		sessionId,
	};
	return Buffer.from(`${JSON.stringify(record)}\n`);
}

async function loadSession(sdk, project, file, bytes) {
	const { carried, stored } = sessionIdOf(bytes);
	const copy = join(project, `${stored}.jsonl`);
	writeFileSync(copy, bytes);
	const before = statSync(copy);
	const result = { file, sessionId: carried, storedAs: stored };
	try {
		result.messages = await sdk.getSessionMessages(stored, { includeSystemMessages: true });
	} catch (error) {
		result.error = String(error?.stack ?? error);
	}
	const after = statSync(copy);
	result.untouched =
		readFileSync(copy).equals(bytes) && after.mtimeMs === before.mtimeMs && readdirSync(project).length === 1;
	rmSync(copy);
	return result;
}

async function loadSubagent(sdk, project, file, bytes, { session, agent, main }) {
	const mainCopy = join(project, `${session}.jsonl`);
	const folder = join(project, session, "subagents");
	const copy = join(folder, `agent-${agent}.jsonl`);
	mkdirSync(folder, { recursive: true });
	writeFileSync(mainCopy, main === null ? stubSession(session) : readFileSync(main));
	writeFileSync(copy, bytes);
	const before = statSync(copy);
	const result = { file, sessionId: session, storedAs: `${session}/subagents/agent-${agent}` };
	try {
		result.messages = await sdk.getSubagentMessages(session, agent);
	} catch (error) {
		result.error = String(error?.stack ?? error);
	}
	const after = statSync(copy);
	result.untouched =
		readFileSync(copy).equals(bytes) && after.mtimeMs === before.mtimeMs && readdirSync(folder).length === 1;
	rmSync(join(project, session), { recursive: true });
	rmSync(mainCopy);
	return result;
}

async function main() {
	const [packageDir] = process.argv.slice(2);
	const files = JSON.parse(readFileSync(0, "utf8"));
	const home = mkdtempSync(join(tmpdir(), "sessionfix-claude-"));
	process.env.HOME = home;
	delete process.env.CLAUDE_CONFIG_DIR;
	const project = join(home, ".claude", "projects", "-tmp-x");
	mkdirSync(project, { recursive: true });
	try {
		const sdk = await import(pathToFileURL(join(packageDir, "sdk.mjs")).href);
		for (const { file, subagent } of files) {
			const bytes = readFileSync(file);
			const result = subagent
				? await loadSubagent(sdk, project, file, bytes, subagent)
				: await loadSession(sdk, project, file, bytes);
			process.stdout.write(`${JSON.stringify(result)}\n`);
		}
	} finally {
		rmSync(home, { recursive: true, force: true });
	}
}

await main();
