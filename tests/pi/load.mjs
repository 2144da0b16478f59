// Load session files with pi's own session code and print, per file, one JSON line:
// what pi parsed, which physical lines it skipped, its leaf and the context it would
// send to the model; or `"error"` when pi threw while opening the session, or
// `"hang": true` when it did not finish within the time limit (its walk from the leaf
// to the root has no cycle check).
//
//   node load.mjs PI_PACKAGE_DIR FILE...
//
// Files are opened without persistence, so pi never rewrites them (it would after
// migrating an older version). Loading runs in a worker thread, replaced when a
// file hangs it.

import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";

const LIMIT_MS = 5000;

// The physical lines pi's loader skips: its own loop (trim, split on "\n", skip blank
// lines, JSON.parse the rest), numbered as the lines of the file.
function skippedLines(content) {
	const trimmed = content.trim();
	const lead = content.slice(0, content.indexOf(trimmed)).split("\n").length - 1;
	const skipped = [];
	trimmed.split("\n").forEach((line, index) => {
		if (!line.trim()) return;
		try {
			JSON.parse(line);
		} catch {
			skipped.push(lead + index + 1);
		}
	});
	return skipped;
}

async function serve() {
	const pi = await import(pathToFileURL(join(workerData, "dist/core/session-manager.js")).href);
	parentPort.on("message", (file) => {
		const content = readFileSync(file, "utf8");
		const parsed = pi.parseSessionEntries(content);
		let manager;
		let context;
		try {
			manager = new pi.SessionManager(process.cwd(), tmpdir(), file, false);
			context = manager.buildSessionContext();
		} catch (error) {
			parentPort.postMessage({ file, error: String(error) });
			return;
		}
		parentPort.postMessage({
			file,
			parsed: parsed.length,
			skipped: skippedLines(content),
			loaded: manager.getEntries().length,
			header: manager.getHeader()?.id ?? null,
			leaf: manager.getLeafId(),
			messages: context.messages,
		});
	});
}

function load(worker, file) {
	return new Promise((resolve, reject) => {
		const timer = setTimeout(() => {
			cleanup();
			resolve(null);
		}, LIMIT_MS);
		const onMessage = (result) => {
			cleanup();
			resolve(result);
		};
		const onError = (error) => {
			cleanup();
			reject(error);
		};
		function cleanup() {
			clearTimeout(timer);
			worker.off("message", onMessage);
			worker.off("error", onError);
		}
		worker.on("message", onMessage);
		worker.on("error", onError);
		worker.postMessage(file);
	});
}

async function main() {
	const [packageDir, ...files] = process.argv.slice(2);
	const start = () => new Worker(new URL(import.meta.url), { workerData: packageDir });
	let worker = start();
	for (const file of files) {
		const result = await load(worker, file);
		if (result === null) {
			await worker.terminate();
			worker = start();
		}
		process.stdout.write(`${JSON.stringify(result ?? { file, hang: true })}\n`);
	}
	await worker.terminate();
}

if (isMainThread) {
	await main();
} else {
	await serve();
}
