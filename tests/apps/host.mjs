// A test host for Warden's MCP App view, as a person would see it.
//
//   node host.mjs SERVER_BINARY OUT_DIR      (run through tests/apps/run)
//
// 1. Connects to the server binary over stdio with the official MCP client
//    (@modelcontextprotocol/client), as a chat client would, declaring the
//    MCP Apps extension. That is the TypeScript SDK's v2 client package,
//    which ext-apps 2 takes as its peer: one SDK, not v1's
//    @modelcontextprotocol/sdk beside it.
// 2. Finds run_script's view through its tool definition (the SDK's own
//    getToolUiResourceUri) and reads it with resources/read.
// 3. Runs a real run_script task that draws a PNG heatmap and writes a CSV.
// 4. Opens headless Chromium (puppeteer-core) on host.html, which mounts the
//    view in a sandboxed iframe under the hosts' default CSP behind the
//    official AppBridge (@modelcontextprotocol/ext-apps, bundled with
//    esbuild for the page); the view's tool calls go through the bridge to
//    this process's MCP client. The bridge sends the tool input and result.
// 5. Checks the rendered DOM: the chart image loaded and is not blank, the
//    CSV table's rows, note and a known cell, sorting by a header click,
//    the status and summary; no console error (a CSP violation is one).
//    Then a batch with a failing call and a failing script, in the view too.
// 6. Saves a screenshot to OUT_DIR/view.png and prints one JSON verdict
//    line; exits 0 only when every check passed.
//
// Chromium is Debian's /usr/bin/chromium (.ci/run installs it) or $CHROMIUM.

import { mkdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { getToolUiResourceUri, RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/app-bridge";
import * as esbuild from "esbuild";
import puppeteer from "puppeteer-core";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EXTENSION_ID = "io.modelcontextprotocol/ui";
const CSV_ROWS = 300;
/** What the view shows of a CSV (its SHOWN_ROWS). */
const SHOWN_ROWS = 200;
const TIMEOUT_MS = 120_000;

/** A heatmap PNG, a 300-row CSV and a final answer. */
const SCRIPT = `
let grid = [];
for s in [80.0, 85.0, 90.0, 95.0, 100.0, 105.0, 110.0, 115.0, 120.0] {
  for v in [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4] {
    let a = #{option_type: "call", spot: s, strike: 100.0, time_to_expiry: 0.5, volatility: v, rate: 0.03};
    grid.push(#{spot: s, vol: v, price: price_option_t(a).result});
  }
}
write_artifact("surface.png", heatmap(grid, #{x: "spot", y: "vol", z: "price", title: "Call price", x_label: "Spot", y_label: "Volatility"}));
let rows = [];
for i in 0..${CSV_ROWS} { rows.push(#{i: i, label: "row " + i, y: (i * i) % 97, noise: 0.1 + 0.2 - 0.3, third: i / 3.0}); }
write_artifact("rows.csv", to_csv(rows, ["i", "label", "y", "noise", "third"]));
print("printed by the script");
final_answer(#{task_type: "analysis", summary: "63 prices on a grid and ${CSV_ROWS} rows", metrics: #{scenarios: grid.len(), rows: rows.len()}})
`;

async function main() {
  const [server, outDir] = process.argv.slice(2);
  if (!server || !outDir) throw new Error("usage: host.mjs SERVER_BINARY OUT_DIR");
  mkdirSync(outDir, { recursive: true });
  const checks = {};
  const consoleErrors = [];
  let toolCalls = 0;

  // ---- 1. the MCP client, over stdio ----
  const transport = new StdioClientTransport({
    command: server,
    args: [],
    env: { ...process.env, WARDEN_ARTIFACTS_DIR: path.join(outDir, "artifacts") },
    stderr: "ignore",
  });
  const client = new Client(
    { name: "warden-apps-test-host", version: "1.0.0" },
    { capabilities: { extensions: { [EXTENSION_ID]: { mimeTypes: [RESOURCE_MIME_TYPE] } } } },
  );
  await client.connect(transport);
  let browser;
  try {
    const capabilities = client.getServerCapabilities() || {};
    checks.extension_declared = Boolean(capabilities.extensions && capabilities.extensions[EXTENSION_ID]);

    // ---- 2. the view, from the tool definition ----
    const { tools } = await client.listTools();
    const runScript = tools.find((t) => t.name === "run_script");
    const uri = runScript && getToolUiResourceUri(runScript);
    checks.view_uri = uri || null;
    if (!uri) throw new Error("run_script links no view");
    const read = await client.readResource({ uri });
    const contents = read.contents[0];
    checks.view_mime_type = contents.mimeType;
    const viewHtml = contents.text;

    // ---- 3. a real task ----
    const toolInput = { script: SCRIPT, timeout_seconds: 90 };
    const toolResult = await client.callTool({ name: "run_script", arguments: toolInput }, { timeout: TIMEOUT_MS });
    const task = toolResult.structuredContent || {};
    checks.task_status = task.status;
    checks.receipt_hashes = [...(task.receipt?.scripts || []), ...(task.receipt?.artifacts || [])].map((f) => f.sha256);
    if (task.status !== "success") throw new Error(`run_script: ${JSON.stringify(task)}`);

    // ---- 4. Chromium, the host page, the bridge ----
    const bundle = await esbuild.build({
      entryPoints: [path.join(HERE, "bridge-entry.js")],
      bundle: true,
      format: "iife",
      globalName: "ExtApps",
      platform: "browser",
      write: false,
      logLevel: "silent",
    });
    browser = await puppeteer.launch({
      executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
      headless: true,
      // A loaded CI machine (the whole suite runs beside this) starts Chromium slowly.
      timeout: TIMEOUT_MS,
      userDataDir: path.join(outDir, "profile"),
      args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--hide-scrollbars"],
    });
    const mount = async (toolInput, toolResult) => {
      const page = await browser.newPage();
      await page.setViewport({ width: 1200, height: 900 });
      page.on("console", (message) => {
        if (message.type() === "error") consoleErrors.push(message.text());
      });
      page.on("pageerror", (error) => consoleErrors.push(String(error)));
      await page.exposeFunction("hostCallTool", async (params) => {
        toolCalls += 1;
        return client.callTool(params, { timeout: TIMEOUT_MS });
      });
      await page.setContent(await readFile(path.join(HERE, "host.html"), "utf8"));
      await page.addScriptTag({ content: bundle.outputFiles[0].text });
      const appInfo = await page.evaluate(
        (html, input, result) => window.showView(html, input, result),
        viewHtml, toolInput, toolResult,
      );
      const frame = page.frames().find((f) => f.parentFrame() === page.mainFrame());
      if (!frame) throw new Error("no view frame");
      await frame.waitForSelector('body[data-rendered="true"]', { timeout: TIMEOUT_MS });
      return { page, frame, appInfo };
    };
    const { page, frame, appInfo } = await mount(toolInput, toolResult);
    checks.app_info = appInfo || null;

    // ---- 5. what a person sees ----
    Object.assign(checks, await frame.evaluate(inspect));
    checks.sorted_descending = await sortByHeader(frame, "y");
    checks.tool_calls_through_bridge = toolCalls;

    // ---- 6. the screenshot ----
    const screenshot = path.join(outDir, "view.png");
    await page.screenshot({ path: screenshot, fullPage: true });
    checks.screenshot = screenshot;

    // ---- 7. a batch (one call fails) and a failed script, in the same view ----
    const batchInput = { calls: [
      { name: "price_option_t", arguments: { option_type: "call", spot: 100, strike: 100, time_to_expiry: 1, volatility: 0.2, rate: 0.05 } },
      { name: "price_option_t", arguments: { option_type: "call", spot: 100, strike: 100, time_to_expiry: 1, volatility: -1, rate: 0.05 } },
    ] };
    const batchResult = await client.callTool({ name: "run_batch", arguments: batchInput }, { timeout: TIMEOUT_MS });
    const batch = await mount(batchInput, batchResult);
    checks.batch = await batch.frame.evaluate(() => ({
      status: document.querySelector("#status").textContent,
      summary: document.querySelector("#summary").textContent,
      calls: [...document.querySelectorAll("#calls tr")].slice(1).map((tr) => tr.children[3].textContent),
      detail_wraps: [...document.querySelectorAll("#calls tr")].slice(1)
        .every((tr) => getComputedStyle(tr.children[5]).whiteSpace === "pre-wrap"),
    }));
    await batch.page.close();
    const failingInput = { script: 'let x = 1; throw "no data for 2020"' };
    const failingResult = await client.callTool({ name: "run_script", arguments: failingInput }, { timeout: TIMEOUT_MS });
    const failing = await mount(failingInput, failingResult);
    checks.failed_script = await failing.frame.evaluate(() => ({
      status: document.querySelector("#status").textContent,
      error: document.querySelector("#error").hidden ? null : document.querySelector("#error").textContent,
    }));
    await failing.page.close();
  } finally {
    checks.console_errors = consoleErrors;
    if (browser) await browser.close();
    await client.close();
  }
  return checks;
}

/** Runs in the view's frame: what the page shows. */
async function inspect() {
  const text = (selector) => (document.querySelector(selector) || {}).textContent || "";
  const images = [];
  for (const image of document.querySelectorAll("#charts img")) {
    const canvas = document.createElement("canvas");
    canvas.width = image.naturalWidth;
    canvas.height = image.naturalHeight;
    let variance = 0;
    let colours = 0;
    if (image.complete && image.naturalWidth > 0) {
      const context = canvas.getContext("2d");
      context.drawImage(image, 0, 0);
      const { data } = context.getImageData(0, 0, canvas.width, canvas.height);
      let sum = 0;
      let squares = 0;
      const seen = new Set();
      const pixels = data.length / 4;
      for (let i = 0; i < data.length; i += 4) {
        const grey = (data[i] + data[i + 1] + data[i + 2]) / 3;
        sum += grey;
        squares += grey * grey;
        if (seen.size < 1000) seen.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
      }
      variance = squares / pixels - (sum / pixels) ** 2;
      colours = seen.size;
    }
    images.push({
      alt: image.alt, complete: image.complete, width: image.naturalWidth, height: image.naturalHeight,
      variance: Math.round(variance), colours, rendered_width: image.getBoundingClientRect().width,
    });
  }
  const tables = [...document.querySelectorAll("#tables table.data")].map((table) => {
    const header = [...table.querySelectorAll("thead th")].map((th) => th.textContent);
    const rows = [...table.querySelectorAll("tbody tr")].map((tr) => [...tr.children].map((td) => td.textContent));
    const note = table.closest("[data-artifact]").querySelector(".note");
    return { header, rows: rows.length, first_row: rows[0] || null, row_7: rows[7] || null, note: note ? note.textContent : "" };
  });
  const metrics = Object.fromEntries([...document.querySelectorAll("#metrics tr")]
    .map((tr) => [tr.children[0].textContent, tr.children[1].textContent]));
  return {
    status: text("#status"),
    summary: text("#summary"),
    output: document.querySelector("#output").hidden ? null : text("#output pre"),
    task: text("#task"),
    metrics,
    errors: [...document.querySelectorAll(".error")].filter((e) => !e.hidden).map((e) => e.textContent),
    images,
    tables,
    receipt: {
      shown: !document.querySelector("#receipt").hidden,
      files: [...document.querySelectorAll("#receipt table.hashes code[title]")].map((code) => code.title),
    },
  };
}

/** Clicks the header `column` twice (ascending, then descending): the first row's cell. */
async function sortByHeader(frame, column) {
  const header = await frame.waitForSelector(`#tables table.data thead th:nth-child(${3})`);
  const name = await header.evaluate((th) => th.textContent);
  if (name !== column) return { error: `third header is ${name}` };
  await header.click();
  const ascending = await frame.evaluate(() => document.querySelector("#tables tbody tr td:nth-child(3)").textContent);
  await header.click();
  const descending = await frame.evaluate(() => document.querySelector("#tables tbody tr td:nth-child(3)").textContent);
  const sort = await header.evaluate((th) => th.getAttribute("aria-sort"));
  return { ascending_first: ascending, descending_first: descending, aria_sort: sort };
}

/** The verdict: each expectation a person would have of the page. */
function judge(checks) {
  const image = (checks.images || [])[0] || {};
  const table = (checks.tables || [])[0] || {};
  const failures = [];
  const expect = (ok, what) => { if (!ok) failures.push(what); };
  expect(checks.extension_declared, "the server declares the MCP Apps extension");
  expect(checks.view_mime_type === RESOURCE_MIME_TYPE, `the view's MIME type is ${RESOURCE_MIME_TYPE}`);
  expect(checks.status === "success", "the status reads success");
  expect(String(checks.summary).includes(`${CSV_ROWS} rows`), "the summary is shown");
  expect(checks.metrics && checks.metrics.scenarios === "63", "the metrics are shown");
  expect(image.complete && image.width > 0 && image.variance > 100 && image.colours > 20, "the chart image loaded and is not blank");
  expect(table.rows === SHOWN_ROWS, `the table draws ${SHOWN_ROWS} rows`);
  expect(String(table.note).startsWith(`showing ${SHOWN_ROWS} of ${CSV_ROWS} rows`), "the table says how many rows it shows");
  expect(JSON.stringify(table.row_7) === JSON.stringify(["7", "row 7", "49", "0", "2.33333"]),
    "a known row, numbers for people (row 7: y = 49, rounding noise as 0, 7/3 to six figures)");
  expect(String(checks.output).includes("printed by the script"), "the script's printed output is shown");
  const sorted = checks.sorted_descending || {};
  expect(sorted.ascending_first === "0" && sorted.descending_first === "96" && sorted.aria_sort === "descending", "sorting by a header click");
  expect((checks.errors || []).length === 0, "the view shows no error");
  expect((checks.console_errors || []).length === 0, "no console error (a CSP violation is one)");
  const receipt = checks.receipt || {};
  expect(receipt.shown && receipt.files.length >= 3
    && JSON.stringify(receipt.files) === JSON.stringify(checks.receipt_hashes),
    "the receipt lists every script and artifact with its SHA-256");
  expect(checks.tool_calls_through_bridge >= 2, "artifacts were read through the bridge");
  const batch = checks.batch || {};
  expect(batch.status === "failed" && JSON.stringify(batch.calls) === JSON.stringify(["success", "failed"]),
    "a batch shows each call's status");
  expect(String(batch.summary).includes("1 succeeded, 1 failed"), "a batch's counts are its summary");
  expect(batch.detail_wraps === true, "a batch's outputs wrap in their cells instead of running off the edge");
  const failed = checks.failed_script || {};
  expect(failed.status === "failed" && String(failed.error).includes("no data for 2020"), "a failed script shows its error");
  return failures;
}

main().then((checks) => {
  const failures = judge(checks);
  process.stdout.write(`${JSON.stringify({ ok: failures.length === 0, failures, checks })}\n`);
  process.exit(failures.length === 0 ? 0 : 1);
}, (error) => {
  process.stdout.write(`${JSON.stringify({ ok: false, failures: [String(error && error.stack || error)] })}\n`);
  process.exit(1);
});
