// Loads pages of Octant's web view in headless Chromium (Debian's chromium, driven by
// playwright-core) and reports, per page, what a person and a screen reader would meet:
// a full-page screenshot, the page's own scripts (there must be none), axe-core's
// accessibility violations, which focusable elements the Tab key reaches, and a few facts
// the test asserts (unsafe rows, the timeline's marks, the text).
//
// Usage: NODE_PATH=.octant/node/node_modules node check_pages.cjs '{"out": DIR, "token": T|null,
//        "login": {"url": URL, "token": T}|null,
//        "pages": [{"name": "run", "url": "http://127.0.0.1:PORT/runs/ID"}]}'
// With "login", the browser first opens the URL without credentials, is sent to the login page
// (reported as the page "login"), types the token into the form and submits it with the
// keyboard; the pages are then loaded with the session cookie that set (no header).
// Writes one JSON document to stdout: {"login": {redirected, after}|null, "pages": [{name,
// status, url, screenshot, scripts, violations, focusable, reached, refresh (a live page: the focused link before and after a reload), unsafe_rows, unsafe_marks,
// timeline_desc, handoffs, band_marks, intervals, links, text, alert_rows, styled (the stylesheet applied),
// csp (Content-Security-Policy refusals the console reported), widths ([{width, overflow, screenshot}]
// at 1,280 and 390 pixels: overflow is how many pixels the page scrolls sideways), print
// ({nav_hidden, screenshot} with print media)}]}.
const { chromium } = require("playwright-core");
const fs = require("fs");
const path = require("path");

(async () => {
  const args = JSON.parse(process.argv[2]);
  const executablePath = process.env.OCTANT_CHROMIUM || "/usr/bin/chromium";
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-gpu"] });
  const headers = args.token ? { Authorization: `Bearer ${args.token}` } : {};
  const context = await browser.newContext({ extraHTTPHeaders: headers, viewport: { width: 1200, height: 900 } });
  const axeSource = fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
  const out = { login: null, pages: [] };
  // Content-Security-Policy refusals, per page (the console reports each).
  const watch = (page) => {
    const refused = [];
    page.on("console", (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) refused.push(m.text().slice(0, 200));
    });
    return refused;
  };
  // What a person and a screen reader meet on the page open in `page`.
  const inspect = async (page, name, response) => {
    const screenshot = path.join(args.out, `${name}.png`);
    await page.screenshot({ path: screenshot, fullPage: true });
    // Before anything is injected: the page's own scripts.
    const scripts = await page.evaluate(() => document.querySelectorAll("script").length);
    const facts = await page.evaluate(() => ({
      unsafe_rows: Array.from(document.querySelectorAll("tr.unsafe")).map((r) => r.id),
      unsafe_marks: document.querySelectorAll("#timeline .unsafe-mark").length,
      timeline_desc: (document.querySelector("#timeline desc") || {}).textContent || null,
      handoffs: document.querySelectorAll("#timeline .handoff").length,
      band_marks: document.querySelectorAll("svg.bands-chart .band").length,
      intervals: document.querySelectorAll("svg.bands-chart .interval").length,
      chart_descs: Array.from(document.querySelectorAll("svg.bands-chart desc")).map((d) => d.textContent),
      links: Array.from(document.querySelectorAll("a[href]")).map((a) => a.getAttribute("href")),
      text: document.body.innerText,
      alert_rows: Array.from(document.querySelectorAll("#alerts tbody tr")).map((r) => r.innerText),
      fleet_rows: Array.from(document.querySelectorAll("#systems tbody tr")).map((r) => ({
        system: r.querySelector("th").textContent,
        unsuitable: r.classList.contains("unsuitable"),
      })),
      focusable: Array.from(document.querySelectorAll("a[href], button, input:not([type='hidden']), select, textarea, [tabindex]:not([tabindex='-1'])")).map(
        (e) => e.outerHTML.slice(0, 120),
      ),
    }));
    // Every control reachable with the keyboard: Tab through the page once.
    const reached = [];
    for (let i = 0; i < facts.focusable.length + 2; i++) {
      await page.keyboard.press("Tab");
      const h = await page.evaluate(() =>
        document.activeElement && document.activeElement !== document.body ? document.activeElement.outerHTML.slice(0, 120) : null,
      );
      if (h && !reached.includes(h)) reached.push(h);
    }
    // A page that reloads its live part keeps the keyboard's place: focus a link in it, wait
    // for the part to be replaced, and see which element has the focus.
    let refresh = null;
    if (await page.$("#pause")) {
      // Unchanged content is not replaced: mark the live part (an attribute of its own, which
      // leaves its content as the server sends it) and wait two and a half periods.
      const period = await page.evaluate(() => parseFloat(document.getElementById("refresh-note").textContent.replace(/[^0-9.]/g, "")));
      const unchanged = await page.evaluate(async (ms) => {
        const f = document.getElementById("fleet");
        const content = f.innerHTML;
        f.dataset.kept = "yes";
        await new Promise((r) => setTimeout(r, ms));
        const now = document.getElementById("fleet");
        return { kept: now.dataset.kept === "yes", same: now.innerHTML === content };
      }, period * 2500);
      // A change is replaced, and the focus stays: focus a link, add a marker the server's
      // content lacks, and wait for the live part to be replaced.
      const before = await page.evaluate(() => {
        const a = document.querySelector("#fleet a[href]");
        if (!a) return null;
        a.focus();
        const marker = document.createElement("span");
        marker.dataset.replaced = "no";
        document.getElementById("fleet").appendChild(marker);
        return a.getAttribute("href");
      });
      if (before) {
        await page.waitForFunction(() => !document.querySelector("#fleet [data-replaced]"), null, { timeout: 60000 });
        refresh = await page.evaluate((before) => {
          const a = document.activeElement;
          return { before, after: a ? a.getAttribute("href") : null, inside: document.getElementById("fleet").contains(a) };
        }, before);
        refresh.unchanged = unchanged;
      }
    }
    // A pause control, when the page has one, must work from the keyboard.
    let paused = null;
    if (await page.$("#pause")) {
      await page.focus("#pause");
      await page.keyboard.press("Enter");
      paused = await page.getAttribute("#pause", "aria-pressed");
    }
    await page.evaluate(axeSource);
    const axe = await page.evaluate(async () => {
      const r = await axe.run(document, { resultTypes: ["violations"] });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.html.slice(0, 200)) }));
    });
    const styled = await page.evaluate(() => getComputedStyle(document.body).fontFamily.includes("system-ui"));
    // At a desktop's width and a phone's: the page never scrolls sideways (a wide table
    // scrolls inside itself); a screenshot of each.
    const widths = [];
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.waitForTimeout(100);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      const shot = path.join(args.out, `${name}-${width}.png`);
      await page.screenshot({ path: shot, fullPage: true });
      widths.push({ width, overflow, screenshot: shot });
    }
    await page.setViewportSize({ width: 1200, height: 900 });
    // Printed: the navigation and controls go, the content stays.
    await page.emulateMedia({ media: "print" });
    const printShot = path.join(args.out, `${name}-print.png`);
    await page.screenshot({ path: printShot, fullPage: true });
    const navHidden = await page.evaluate(() => Array.from(document.querySelectorAll("nav")).every((n) => getComputedStyle(n).display === "none"));
    await page.emulateMedia({ media: "screen" });
    return {
      name, status: response ? response.status() : 0, url: page.url(), screenshot, scripts, paused, refresh, violations: axe, reached,
      styled, csp: page.__refused || [], widths, print: { nav_hidden: navHidden, screenshot: printShot }, ...facts,
    };
  };
  if (args.login) {
    const page = await context.newPage();
    page.__refused = watch(page);
    const response = await page.goto(args.login.url, { waitUntil: "load" });
    const redirected = page.url();
    out.pages.push(await inspect(page, "login", response));
    // Signed in with the keyboard: focus the field, type, Enter submits the form.
    await page.focus("#token");
    await page.keyboard.type(args.login.token);
    await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.keyboard.press("Enter")]);
    out.login = { redirected, after: page.url() };
    await page.close();
  }
  for (const p of args.pages) {
    const page = await context.newPage();
    page.__refused = watch(page);
    const response = await page.goto(p.url, { waitUntil: "load" });
    out.pages.push(await inspect(page, p.name, response));
    await page.close();
  }
  await browser.close();
  process.stdout.write(JSON.stringify(out));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
