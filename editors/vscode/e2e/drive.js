// Drives a real VS Code (code-server) in headless Chromium: open a file, type at its end,
// wait for specfill's ghost text, take a screenshot, press Tab, save. Prints JSON.
//   node drive.js URL FILE_NAME TYPED SCREENSHOT [TIMEOUT_MS]
// With WAIT_LOG (a file) and WAIT_LOG_TEXT, typing waits until the file contains the text.
// playwright-core comes from the code-server install folder (NODE_PATH).
const fs = require('fs');
const { chromium } = require('playwright-core');

async function waitForLog(file, text, deadline) {
  for (;;) {
    const log = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    if (log.includes(text)) return;
    if (Date.now() > deadline) throw new Error(`the server never logged ${JSON.stringify(text)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function main() {
  const [url, fileName, typed, screenshot, timeoutArg] = process.argv.slice(2);
  const timeout = Number(timeoutArg || 120000);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const result = { ok: false };
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  try {
    await page.goto(url);
    await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
    if (process.env.ACCEPT_INSTALL) {
      // A fresh VS Code without a server: the extension offers to install it; accept.
      const toast = page.locator('.notification-toast', { hasText: 'Install it now?' });
      await toast.first().waitFor({ timeout: 60000 });
      await toast.first().locator('.monaco-button', { hasText: /^Install$/ }).click();
      result.offered = true;
    }
    const row = page.locator('.explorer-folders-view .monaco-list-row', { hasText: fileName });
    await row.first().waitFor({ timeout: 60000 });
    await row.first().click();
    const editor = page.locator('.monaco-editor .view-lines').first();
    await editor.waitFor({ timeout: 30000 });
    await editor.click();
    // Type once the model is ready, as a person would after the status bar says so.
    const deadline = Date.now() + timeout;
    for (;;) {
      const texts = await page.locator('.statusbar-item', { hasText: 'specfill' }).allInnerTexts();
      if (texts.length && !texts.some((t) => /loading|starting|no server|installing|not installed/.test(t))) break;
      if (Date.now() > deadline) throw new Error(`server never ready: ${texts}`);
      await page.waitForTimeout(250);
    }
    await page.keyboard.press('Control+End');
    if (process.env.WAIT_LOG && process.env.WAIT_LOG_TEXT) {
      // The cursor rests before typing, as a person's does: wait for what the server logs then.
      await waitForLog(process.env.WAIT_LOG, process.env.WAIT_LOG_TEXT, deadline);
    }
    await page.keyboard.type(typed, { delay: 60 });
    const ghost = page.locator('.monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text');
    await ghost.first().waitFor({ timeout });
    await page.waitForTimeout(300); // let the rest of the first answer render
    result.ghost = (await ghost.allTextContents()).join('\n');
    if (screenshot) await page.screenshot({ path: screenshot });
    await page.keyboard.press('Tab');
    await page.waitForTimeout(300);
    await page.keyboard.press('Control+S');
    // The status bar shows a non-zero accepted share once the acceptance reached the server
    // (it polls every 2 s, and may first show 0% of one shown suggestion).
    const until = Date.now() + 10000;
    do {
      await page.waitForTimeout(500);
      result.status = await page.locator('.statusbar-item', { hasText: 'specfill' }).allInnerTexts();
    } while (!result.status.some((t) => / [1-9]\d*%$/.test(t)) && Date.now() < until);
    result.ok = true;
  } catch (err) {
    result.error = String(err);
    if (screenshot) await page.screenshot({ path: screenshot.replace(/\.png$/, '-failed.png') }).catch(() => {});
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(result.ok ? 0 : 1);
}

main();
