// A headless Chromium driven over the DevTools protocol, with Node's own WebSocket and no npm
// package: what tests/all/status-browser.mjs and bench/report-browser.mjs share (run them with
// `node --experimental-websocket`).
//
//   const browser = await chromium({ width: 1280, height: 900 });
//   try { await browser.navigate(url); ... await browser.evaluate("document.title"); }
//   finally { await browser.close(); }
//
// `errors` collects every exception the page threw and every error or warning it logged
// (with `browserLog`, the browser's own log too: what the Content-Security-Policy blocked,
// failed loads), so that a caller can say a page that had any is not to be trusted.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/// Starts Chromium with a fresh profile and a window of `width` x `height`, and connects to its
/// page. Chromium and its profile are gone once `close()` is done, or when this throws.
export async function chromium({ width, height, browserLog = false }) {
  const profile = mkdtempSync(join(tmpdir(), "factbuoy-devtools-"));
  const browser = spawn("chromium", [
    "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
    `--user-data-dir=${profile}`, "about:blank",
  ], { stdio: "ignore" });
  const stop = async () => {
    browser.kill();
    await sleep(200);
    rmSync(profile, { recursive: true, force: true });
  };
  try {
    const socket = await connect(profile);
    const session = new Session(socket, stop);
    await session.send("Page.enable");
    await session.send("Runtime.enable");
    if (browserLog) await session.send("Log.enable");
    await session.send("Emulation.setDeviceMetricsOverride", { width, height, deviceScaleFactor: 1, mobile: false });
    return session;
  } catch (e) {
    await stop();
    throw e;
  }
}

// Chromium writes the port it chose into the profile, then answers on it; on a loaded machine
// the file may be there before its line is, and the port before its page.
async function connect(profile) {
  const portFile = join(profile, "DevToolsActivePort");
  let page;
  for (let i = 0; !page; i++) {
    if (i === 1200) throw new Error("chromium's DevTools did not answer within 60 s");
    await sleep(50);
    const port = existsSync(portFile) ? readFileSync(portFile, "utf8").split("\n")[0] : "";
    if (!/^[0-9]+$/.test(port)) continue;
    const targets = await fetch(`http://127.0.0.1:${port}/json/list`)
      .then((r) => r.json()).catch(() => []);
    page = targets.find((t) => t.type === "page");
  }
  const socket = new WebSocket(page.webSocketDebuggerUrl);
  await new Promise((r, e) => { socket.onopen = r; socket.onerror = e; });
  return socket;
}

/// One page's session: commands and their answers, events, and the errors the page had.
class Session {
  constructor(socket, stop) {
    this.socket = socket;
    this.stop = stop;
    this.next = 0;
    this.pending = new Map();
    this.listeners = [];
    this.errors = [];
    socket.onmessage = (message) => this.received(JSON.parse(message.data));
  }

  received(m) {
    if (m.id !== undefined) {
      const { resolve, reject } = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (m.error) reject(new Error(JSON.stringify(m.error))); else resolve(m.result);
      return;
    }
    if (m.method === "Runtime.exceptionThrown") {
      const details = m.params.exceptionDetails;
      this.errors.push(details.text + " " + (details.exception?.description ?? ""));
    }
    if (m.method === "Runtime.consoleAPICalled" && ["error", "warning"].includes(m.params.type)) {
      this.errors.push(m.params.args.map((a) => a.value ?? a.description).join(" "));
    }
    if (m.method === "Log.entryAdded" && ["error", "warning"].includes(m.params.entry.level)) {
      this.errors.push(m.params.entry.source + ": " + m.params.entry.text + " " + (m.params.entry.url ?? ""));
    }
    for (const listener of this.listeners) listener(m);
  }

  /// A DevTools command's answer.
  send(method, params = {}) {
    return new Promise((resolve, reject) => {
      const id = ++this.next;
      this.pending.set(id, { resolve, reject });
      this.socket.send(JSON.stringify({ id, method, params }));
    });
  }

  /// The value of `expression` in the page, awaited; what it threw, thrown.
  async evaluate(expression) {
    const { result, exceptionDetails } = await this.send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
    if (exceptionDetails) throw new Error(exceptionDetails.text + " " + JSON.stringify(exceptionDetails.exception));
    return result.value;
  }

  /// Resolves at the page's next load event (of a navigation about to be started).
  nextLoad() {
    return new Promise((r) => this.listeners.push((m) => { if (m.method === "Page.loadEventFired") r(); }));
  }

  /// Opens `url` and waits for its load event.
  async navigate(url) {
    const loaded = this.nextLoad();
    await this.send("Page.navigate", { url });
    await loaded;
  }

  /// Writes a PNG of what the window shows to `path`.
  async screenshot(path) {
    const { data } = await this.send("Page.captureScreenshot", { format: "png" });
    writeFileSync(path, Buffer.from(data, "base64"));
  }

  async close() {
    this.socket.close();
    await this.stop();
  }
}
