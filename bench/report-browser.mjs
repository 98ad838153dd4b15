// Opens a report in headless Chromium, as a person would, and measures it through the DevTools
// protocol (bench/report.sh; the client is tests/support/devtools.mjs):
//
//   node --experimental-websocket bench/report-browser.mjs REPORT.html NODE_QUERY VALUE_QUERY [SHOT.png]
//
// Prints one JSON object: first_screen_ms (from navigation start until the frame after the page
// has drawn its band, failures, charts and first page of nodes), each search's time until the
// page says how many nodes match (the first one inflates the facts), what it said, and the
// errors the page threw or logged (a run with any prints them and is not to be trusted).
// With SHOT, a screenshot of the first screen (1280 x 900) is written there.
import { resolve } from "node:path";
import { chromium } from "../tests/support/devtools.mjs";

const [report, nodeQuery, valueQuery, shot] = process.argv.slice(2);
if (!report || !nodeQuery || !valueQuery) {
  console.error("usage: report-browser.mjs REPORT.html NODE_QUERY VALUE_QUERY [SHOT.png]");
  process.exit(2);
}

const browser = await chromium({ width: 1280, height: 900 });
const { errors } = browser;
const evaluate = (expression) => browser.evaluate(expression);
try {
  await browser.navigate("file://" + resolve(report));
  // The page draws its first screen synchronously before the load event: the frame after it.
  const firstScreen = await evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))");
  if (shot) await browser.screenshot(shot);
  const search = (query) => evaluate(`(async () => {
    const search = document.getElementById("search");
    const count = document.getElementById("search-count");
    search.value = "";
    search.dispatchEvent(new Event("input"));
    while (count.textContent !== "") await new Promise((r) => setTimeout(r, 1));
    const start = performance.now();
    search.value = ${JSON.stringify(query)};
    search.dispatchEvent(new Event("input"));
    while (count.textContent === "") await new Promise((r) => setTimeout(r, 1));
    return [performance.now() - start, count.textContent.trim(), document.querySelectorAll("tr.node-row").length];
  })()`);
  const [nodeMs, nodeSaid, nodeRows] = await search(nodeQuery);
  const [valueMs, valueSaid, valueRows] = await search(valueQuery);
  const [againMs] = await search(nodeQuery);
  const rendered = await evaluate("document.body.dataset.rendered");
  console.log(JSON.stringify({
    first_screen_ms: Math.round(firstScreen),
    search_node_ms: Math.round(nodeMs), search_node_said: nodeSaid, search_node_rows: nodeRows,
    search_value_ms: Math.round(valueMs), search_value_said: valueSaid, search_value_rows: valueRows,
    search_again_ms: Math.round(againMs),
    rendered,
    errors,
  }));
} finally {
  await browser.close();
}
