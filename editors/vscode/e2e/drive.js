// Drives a real VS Code (code-server) in headless Chromium: open a file, type at its end,
// wait for specfill's ghost text, take a screenshot, press Tab, save. Prints JSON.
//   node drive.js URL FILE_NAME TYPED SCREENSHOT [TIMEOUT_MS]
// With WAIT_LOG (a file) and WAIT_LOG_TEXT, typing waits until the file contains the text.
// With GHOST_LINE, the screenshot waits for the ghost text's first line to start with it.
// With STEPS (a JSON list), the steps run instead of typing TYPED and taking the ghost text:
//   {"type": "text"}       types it            {"press": "Alt+Backslash"}  presses a key
//   {"ghost": true}        waits for ghost text and records it in result.ghosts
//   {"noGhost": ms}        waits ms and fails if ghost text showed
//   {"menu": "label"}      clicks the status-bar item and picks the entry starting with label
//   {"status": "regex"}    waits until the status-bar item matches; records it in result.statuses
//   {"command": "title"}   runs a command from the palette (F1)
//   {"pick": "label"}      picks the open quick pick's entry starting with label
//   {"notification": "re"} waits for a notification whose text matches; records it in result.notifications
//   {"button": "label"}    clicks that button of a notification
//   {"log": "text"}        waits until WAIT_LOG contains the text
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

const GHOST = '.monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text';

async function statusText(page) {
  return (await page.locator('.statusbar-item', { hasText: 'specfill' }).allInnerTexts()).join(' | ');
}

const TOAST = '.notification-toast';

async function pick(page, label) {
  const entry = page.locator('.quick-input-widget .monaco-list-row', { hasText: label });
  await entry.first().waitFor({ timeout: 30000 });
  await entry.first().click();
}

async function waitForText(locator, wanted, timeout) {
  const until = Date.now() + timeout;
  for (;;) {
    const found = (await locator.allInnerTexts()).find((t) => wanted.test(t));
    if (found) return found;
    if (Date.now() > until) throw new Error(`nothing matched /${wanted.source}/: ${await locator.allInnerTexts()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The steps that work the command palette, quick picks and notifications; false if not one. */
async function paletteStep(page, step, timeout, result) {
  if (step.command) {
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget .quick-input-box input').first();
    await input.waitFor({ timeout: 10000 });
    await input.fill(`>${step.command}`); // the palette's '>' kept: commands, not files
    await pick(page, step.command);
  } else if (step.pick) {
    await pick(page, step.pick);
  } else if (step.notification) {
    result.notifications.push(await waitForText(page.locator(TOAST), new RegExp(step.notification), timeout));
  } else if (step.button) {
    const button = page.locator(`${TOAST} .monaco-button`, { hasText: step.button });
    await button.first().waitFor({ timeout });
    await button.first().click();
  } else if (step.log) {
    await waitForLog(process.env.WAIT_LOG, step.log, Date.now() + timeout);
  } else {
    return false;
  }
  return true;
}

async function runSteps(page, steps, timeout, result) {
  result.ghosts = [];
  result.statuses = [];
  result.notifications = [];
  for (const step of steps) {
    result.step = step;
    if (await paletteStep(page, step, timeout, result)) {
      // done
    } else if (step.type !== undefined) {
      await page.keyboard.type(step.type, { delay: 60 });
    } else if (step.press) {
      await page.keyboard.press(step.press);
    } else if (step.ghost) {
      const ghost = page.locator(GHOST);
      await ghost.first().waitFor({ timeout });
      await page.waitForTimeout(300); // let the rest of the answer render
      result.ghosts.push((await ghost.allTextContents()).join('\n'));
    } else if (step.noGhost) {
      await page.waitForTimeout(step.noGhost);
      const shown = await page.locator(GHOST).allTextContents();
      if (shown.length) throw new Error(`ghost text showed: ${JSON.stringify(shown)}`);
    } else if (step.menu) {
      await page.locator('.statusbar-item', { hasText: 'specfill' }).first().click();
      const entry = page.locator('.quick-input-widget .monaco-list-row', { hasText: step.menu });
      await entry.first().waitFor({ timeout: 10000 });
      await entry.first().click();
      // Back to typing: the click left focus on the status bar item; the cursor stays put.
      await page.locator('.monaco-editor textarea').first().focus();
    } else if (step.status) {
      const wanted = new RegExp(step.status);
      const until = Date.now() + 10000;
      let text = await statusText(page);
      while (!wanted.test(text)) {
        if (Date.now() > until) throw new Error(`status bar says ${JSON.stringify(text)}, not /${step.status}/`);
        await page.waitForTimeout(200);
        text = await statusText(page);
      }
      result.statuses.push(text);
    } else {
      throw new Error(`unknown step ${JSON.stringify(step)}`);
    }
  }
  delete result.step;
}

async function typeAndAccept(page, typed, timeout, screenshot, result) {
  await page.keyboard.type(typed, { delay: 60 });
  const ghost = page.locator(GHOST);
  await ghost.first().waitFor({ timeout });
  await page.waitForTimeout(300); // let the rest of the first answer render
  result.ghost = (await ghost.allTextContents()).join('\n');
  // With GHOST_LINE, wait (up to 10 s) for the ghost text's first line to grow to it, and for
  // the status bar's figure, so the screenshot shows both.
  const until = Date.now() + 10000;
  const line = () => result.ghost.replace(/\u00a0/g, ' ').split('\n')[0];
  const figure = async () => (await statusText(page)).match(/ \d+ ms/);
  while (process.env.GHOST_LINE && (!line().startsWith(process.env.GHOST_LINE) || !(await figure()))
    && Date.now() < until) {
    await page.waitForTimeout(200);
    result.ghost = (await ghost.allTextContents()).join('\n');
  }
  result.shotStatus = await statusText(page);
  if (screenshot) await page.screenshot({ path: screenshot });
  await page.keyboard.press('Tab');
  await page.waitForTimeout(300);
  await page.keyboard.press('Control+S');
  // The status bar shows a non-zero accepted share once the acceptance reached the server
  // (it polls every 2 s, and may first show 0% of one shown suggestion).
  const accepted = Date.now() + 10000;
  do {
    await page.waitForTimeout(500);
    result.status = await page.locator('.statusbar-item', { hasText: 'specfill' }).allInnerTexts();
  } while (!result.status.some((t) => / [1-9]\d*%$/.test(t)) && Date.now() < accepted);
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
    if (process.env.STEPS) await runSteps(page, JSON.parse(process.env.STEPS), timeout, result);
    else await typeAndAccept(page, typed, timeout, screenshot, result);
    if (screenshot && process.env.STEPS) await page.screenshot({ path: screenshot });
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
