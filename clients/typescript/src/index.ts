// A client for the toolvisor daemon's socket protocol (docs/PROTOCOL.md), in the JSON codec,
// for Node, with no runtime dependencies.
//
//   import { Client } from "toolvisor-client";
//   const c = await Client.connect({ maxTier: "exec", approvalHandler: () => true });
//   console.log((await c.call("bash", { command: "echo hi" })) as { stdout: string });

export * from "./client.js";
export * from "./errors.js";
export * from "./frames.js";
