// The peer for bench/side-by-side.sh: Metacontroller's example hook
// (examples/catset/manifest/sync.js of its repository, a function of
// `{request: {body}}` that returns `{status, body}`, as its nodejs-server image
// calls it) behind the smallest HTTP server Node has. The example itself is
// fetched for the comparison and never committed: its path is the argument.
//
// Usage: node bench/peer-server.js PATH/TO/sync.js PORT
"use strict";
const http = require("http");
const path = require("path");

const [hookPath, port] = process.argv.slice(2);
if (!hookPath || !port) {
  console.error("usage: node bench/peer-server.js PATH/TO/sync.js PORT");
  process.exit(2);
}
const hook = require(path.resolve(hookPath));

http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      let out;
      try {
        out = await hook({ request: { body: JSON.parse(Buffer.concat(chunks)) } });
      } catch (e) {
        out = { status: 400, body: String(e) };
      }
      const body = typeof out.body === "string" ? out.body : JSON.stringify(out.body);
      res.writeHead(out.status || 200, { "Content-Type": "application/json" });
      res.end(body);
    });
  })
  .listen(Number(port), "127.0.0.1");
