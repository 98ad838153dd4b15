// Opens `factbuoy status --web`'s URL in headless Chromium, as a person would, and watches the
// run's page through the DevTools protocol until the run ends (tests/all/status_web.rs; the
// client is tests/support/devtools.mjs, which bench/report-browser.mjs shares):
//
//   node --experimental-websocket tests/all/status-browser.mjs URL SHOT.png [large]
//
// Prints one JSON object: where the page ended up (href, path), whether it stayed the one
// document it loaded (same_document: a marker set at the start survived), each percent and
// each progress text it showed, the first failure it showed while the run was running and which
// section was at the top then, the first estimate of the time left, the final status and
// bundle text, what its Retrieve button said and the report its link opened, the run's row in
// the list of runs its "all runs" link opens, and every error the page threw
// or logged (scripts, the Content-Security-Policy, failed loads). SHOT is a screenshot taken
// while the run was live, a failure, a progress and an estimate shown.
//
// With `large`, for a run of thousands of nodes that has ended: how long the page took from
// navigation to its first drawn frame of the run, the rows of the node table, its pager before
// and after `next`, the nodes left by "only nodes not passed", the failure groups and problem
// rows shown, and the errors; SHOT is its first screen.
import { chromium, sleep } from "../support/devtools.mjs";

const [url, shot, mode] = process.argv.slice(2);
if (!url || !shot) {
  console.error("usage: status-browser.mjs URL SHOT.png [large]");
  process.exit(2);
}
const GIVE_UP_MS = 120000;

const browser = await chromium({ width: 1280, height: 820, browserLog: true });
const { errors } = browser;
const evaluate = (expression) => browser.evaluate(expression);
try {
  await browser.navigate(url);
  await evaluate("window.factbuoyMarker = 'loaded once'");
  const frame = "new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))";

  if (mode === "large") {
    const firstDraw = await evaluate(`(async () => {
      while (document.body.dataset.percent === undefined) await new Promise((r) => setTimeout(r, 5));
      await ${frame};
      return performance.now();
    })()`);
    await browser.screenshot(shot);
    const before = await evaluate(`({ rows: document.querySelectorAll("#grid-table tr").length - 1,
      pageOf: document.getElementById("page-of").textContent, title: document.getElementById("grid-title").textContent,
      groups: document.querySelectorAll("#failures .group").length,
      problems: document.querySelectorAll("#problems-table tr").length - 1,
      problemsMore: document.getElementById("problems-more").textContent,
      plugins: document.querySelectorAll("#plugins-table tr").length - 1 })`);
    const after = await evaluate(`(async () => {
      document.getElementById("next").click();
      await ${frame};
      const pageOf = document.getElementById("page-of").textContent;
      const firstNode = document.querySelector("#grid-table tr:nth-child(2) td").textContent;
      const box = document.getElementById("only-problems");
      box.checked = true;
      box.dispatchEvent(new Event("change"));
      await ${frame};
      return { pageOf, firstNode, onlyProblems: document.getElementById("grid-title").textContent };
    })()`);
    console.log(JSON.stringify({ first_draw_ms: Math.round(firstDraw), before, after, errors }));
  } else {
    const percents = [];
    const progressTexts = [];
    let failureWhileRunning = null;
    let firstSection = null;
    let shotTaken = false;
    let estimate = null;
    let seen;
    const started = Date.now();
    for (;;) {
      seen = await evaluate(`(() => {
        const body = document.body.dataset;
        const failure = document.querySelector("#failures:not(.hidden) .group");
        const sections = [...document.querySelectorAll("main > section")].filter((s) => !s.classList.contains("hidden"));
        const done = [...document.querySelectorAll("#progress:not(.hidden) tr.progress-row")].map((r) => r.textContent);
        return { status: body.status, percent: body.percent, failure: failure && failure.textContent,
                 first: sections.length ? sections[0].id : null, progress: done.join(" | "),
                 eta: document.getElementById("eta") && document.getElementById("eta").textContent,
                 bundle: document.getElementById("bundle").classList.contains("hidden") ? null : document.getElementById("bundle-body").textContent };
      })()`);
      if (seen.percent !== undefined && percents[percents.length - 1] !== Number(seen.percent)) percents.push(Number(seen.percent));
      if (seen.progress && progressTexts[progressTexts.length - 1] !== seen.progress) progressTexts.push(seen.progress);
      if (seen.failure && seen.status === "running" && !failureWhileRunning) {
        failureWhileRunning = { status: seen.status, text: seen.failure };
        firstSection = seen.first;
      }
      if (seen.eta && / left$/.test(seen.eta) && !estimate) estimate = seen.eta;
      if (!shotTaken && failureWhileRunning && seen.status === "running" && seen.progress && estimate) {
        await browser.screenshot(shot);
        shotTaken = true;
      }
      if (seen.status === "complete" || seen.status === "failed") break;
      if (Date.now() - started > GIVE_UP_MS) break;
      await sleep(100);
    }
    if (!shotTaken) await browser.screenshot(shot);
    // Retrieve, one click: the server downloads the bundle; the report link then shows.
    const retrieved = await evaluate(`(async () => {
      document.getElementById("retrieve").click();
      const said = document.getElementById("retrieved");
      while (!/^retrieve(d to| failed)/.test(said.textContent)) await new Promise((r) => setTimeout(r, 20));
      const report = document.getElementById("report");
      return { text: said.textContent, report_shown: !report.classList.contains("hidden"), report: report.href };
    })()`);
    const where = await evaluate("({ href: location.href, path: location.pathname, same: window.factbuoyMarker === 'loaded once', navigations: performance.getEntriesByType('navigation').length })");
    // The list of runs, one click away, with the cookie alone.
    const listed = browser.nextLoad();
    await evaluate("document.querySelector('header a').click()");
    await listed;
    const runsRow = await evaluate(`(async () => {
      while (document.querySelectorAll("#runs tr").length < 2) await new Promise((r) => setTimeout(r, 20));
      return document.querySelector("#runs tr:nth-child(2)").textContent;
    })()`);
    // The bundle's HTML report, opened from the page's link with the cookie alone.
    await browser.navigate(retrieved.report);
    const report = await evaluate("({ title: document.title, path: location.pathname, text: document.body.innerText.slice(0, 2000) })");
    console.log(JSON.stringify({
      retrieved,
      report,
      href: where.href,
      path: where.path,
      same_document: where.same,
      navigations: where.navigations,
      percents,
      progress_texts: progressTexts,
      failure_while_running: failureWhileRunning,
      first_section: firstSection,
      estimate,
      final_status: seen.status,
      bundle: seen.bundle,
      runs_row: runsRow,
      errors,
    }));
  }
} finally {
  await browser.close();
}
