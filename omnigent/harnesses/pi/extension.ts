// omnigent's extension for pi: loaded with `pi --mode rpc --no-extensions -e <this file>`
// by the `pi` harness (omnigent/harnesses/pi/, docs/harnesses-native.md). Everything it
// needs comes from the environment the harness builds:
//
//   OMNIGENT_PI_BASE_URL, OMNIGENT_PI_API, OMNIGENT_PI_MODEL   the model endpoint, as the
//       provider "omnigent" (its key is read by pi from $OMNIGENT_MODEL_KEY: a variable
//       name, never a literal, so no key can be taken for one of pi's "!command"s)
//   OMNIGENT_PI_INSTRUCTIONS   the agent's prompt, appended to pi's system prompt
//   OMNIGENT_BRIDGE_SOCKET, OMNIGENT_BRIDGE_TOKEN   the session's tool bridge
//
// Through the bridge (one JSON line each way per connection, see
// omnigent/harnesses/bridge/_protocol.py) it registers omnigent's tools as pi tools —
// each call runs in omnigent's turn, through its policies — and asks omnigent's
// policies about each of pi's own tool calls before it runs (`tool_call` can block it;
// if omnigent cannot be asked, the call is blocked).
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import * as net from "node:net";
import { Type } from "typebox";

const env = process.env;
const PI_TOOLS = new Set(["read", "bash", "edit", "write", "grep", "find", "ls"]);
const MAX_ANSWER = 64 * 1024 * 1024;

type Answer = { [key: string]: unknown };

function bridge(request: Answer, signal?: AbortSignal): Promise<Answer> {
	return new Promise((resolve, reject) => {
		let settled = false;
		const chunks: Buffer[] = [];
		let size = 0;
		const socket = net.createConnection(env.OMNIGENT_BRIDGE_SOCKET ?? "");
		const finish = (error: Error | null, answer?: Answer) => {
			if (settled) return;
			settled = true;
			socket.destroy();
			if (error) reject(error);
			else resolve(answer ?? {});
		};
		const abort = () => finish(new Error("the call was aborted"));
		if (signal?.aborted) return abort();
		signal?.addEventListener("abort", abort, { once: true });
		socket.on("connect", () => {
			socket.write(`${JSON.stringify({ token: env.OMNIGENT_BRIDGE_TOKEN ?? "", ...request })}\n`);
		});
		socket.on("data", (chunk: Buffer) => {
			chunks.push(chunk);
			size += chunk.length;
			const data = Buffer.concat(chunks);
			const end = data.indexOf(10);
			if (end >= 0) {
				try {
					finish(null, JSON.parse(data.subarray(0, end).toString("utf8")) as Answer);
				} catch {
					finish(new Error("omnigent answered something that is not JSON"));
				}
			} else if (size > MAX_ANSWER) {
				finish(new Error("omnigent's answer is too long"));
			}
		});
		socket.on("error", (error: Error) => finish(error));
		socket.on("close", () => finish(new Error("omnigent closed the connection (the turn ended)")));
	});
}

export default async function (pi: ExtensionAPI) {
	const model = env.OMNIGENT_PI_MODEL ?? "";
	pi.registerProvider("omnigent", {
		baseUrl: env.OMNIGENT_PI_BASE_URL ?? "",
		apiKey: "OMNIGENT_MODEL_KEY",
		api: (env.OMNIGENT_PI_API ?? "openai-completions") as "openai-completions",
		models: [
			{
				id: model,
				name: model,
				reasoning: false,
				input: ["text", "image"],
				cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
				contextWindow: 128000,
				maxTokens: 16384,
			},
		],
	});

	const instructions = env.OMNIGENT_PI_INSTRUCTIONS ?? "";
	if (instructions) {
		pi.on("before_agent_start", async (event) => ({
			systemPrompt: `${event.systemPrompt}\n\n${instructions}`,
		}));
	}

	let offered: Answer[] = [];
	try {
		const answer = await bridge({ op: "list" });
		if (Array.isArray(answer.tools)) offered = answer.tools as Answer[];
		else process.stderr.write(`omnigent: no tools: ${String(answer.error)}\n`);
	} catch (error) {
		process.stderr.write(`omnigent: cannot list its tools: ${(error as Error).message}\n`);
	}
	const ours = new Set<string>();
	for (const tool of offered) {
		const name = String(tool.name);
		if (PI_TOOLS.has(name)) continue; // pi's own would be replaced
		ours.add(name);
		pi.registerTool({
			name,
			label: name,
			description: String(tool.description ?? ""),
			parameters: Type.Unsafe(tool.inputSchema as object),
			async execute(toolCallId, params, signal) {
				const request = { op: "call", name, arguments: params ?? {}, call_id: toolCallId };
				const answer = await bridge(request, signal);
				if (typeof answer.output !== "string") throw new Error(String(answer.error));
				return { content: [{ type: "text", text: answer.output }], details: {} };
			},
		});
	}

	pi.on("tool_call", async (event, ctx) => {
		if (ours.has(event.toolName)) return undefined; // omnigent checks it as it runs it
		const request = {
			op: "check",
			tool_name: event.toolName,
			tool_input: event.input ?? {},
			call_id: event.toolCallId,
		};
		let answer: Answer;
		try {
			answer = await bridge(request, ctx.signal);
		} catch (error) {
			return { block: true, reason: `omnigent could not check this call: ${(error as Error).message}` };
		}
		if (answer.allow === true) return undefined;
		const reason = answer.reason || answer.error || "denied by omnigent's policies";
		return { block: true, reason: String(reason) };
	});
}
