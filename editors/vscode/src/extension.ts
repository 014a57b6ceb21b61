// specfill for VS Code: starts the language server (`specfill attach`, which joins the shared
// server; `specfill serve` with server.shared off), shows its inline suggestions, and a status
// bar item with the model state, the last latency and the acceptance rate; clicking it opens
// the controls (per language, snooze, on/off).
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions, State } from 'vscode-languageclient/node';
import { askSnooze, controlState, endSnooze, languageOn, setLanguage, showMenu, snoozed } from './controls';
import { findPython, install, installed } from './install';
import { chooseModel } from './models';
import { noteAsked, onRefresh } from './refresh';

const SECTION = 'specfill';
let client: LanguageClient | undefined;
let serverExe: string | undefined; // the server last started: the model menu runs it too
let status: vscode.StatusBarItem;
let poll: NodeJS.Timeout | undefined;
let lastState = '';
let output: vscode.OutputChannel; // the server's log and the installer's
let focusTimer: NodeJS.Timeout | undefined;
const FOCUS_DEBOUNCE_MS = 150;

/** Where the cursor landed or rests: the server reads that place's prompt while idle. */
function sendFocus(editor: vscode.TextEditor | undefined): void {
  if (focusTimer) clearTimeout(focusTimer);
  if (!editor || !['file', 'untitled'].includes(editor.document.uri.scheme)) return;
  focusTimer = setTimeout(() => {
    if (!client || client.state !== State.Running) return;
    const position = editor.selection.active;
    client.sendNotification('specfill/didFocus', {
      textDocument: { uri: editor.document.uri.toString() },
      position: { line: position.line, character: position.character },
    });
  }, FOCUS_DEBOUNCE_MS);
}

/** Every `specfill.*` setting of the manifest, nested as the server reads it. */
function settings(context: vscode.ExtensionContext): Record<string, unknown> {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const props = context.extension.packageJSON.contributes.configuration.properties as Record<string, unknown>;
  const out: Record<string, any> = {};
  for (const full of Object.keys(props)) {
    const keys = full.slice(SECTION.length + 1).split('.');
    let node = out;
    for (const k of keys.slice(0, -1)) node = node[k] ??= {};
    node[keys[keys.length - 1]] = cfg.get(full.slice(SECTION.length + 1));
  }
  return out;
}

/** `specfill` on PATH, if any. */
function onPath(): string | undefined {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const candidate = path.join(dir, 'specfill');
    if (dir && fs.existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** Install (or repair) the server, with progress; its path, or undefined after a failure said. */
async function installServer(context: vscode.ExtensionContext): Promise<string | undefined> {
  showStatus('$(sync~spin) specfill: installing', 'installing the server');
  try {
    const python = findPython(vscode.workspace.getConfiguration(SECTION).get<string>('server.python') || '');
    const done = await install(context, python, output);
    vscode.window.showInformationMessage(`specfill: server ${done.version} installed (${done.build} build).`);
    return done.server;
  } catch (err: any) {
    showStatus('$(error) specfill: not installed', String(err.message ?? err), true);
    const choice = await vscode.window.showErrorMessage(`specfill: ${err.message ?? err}`, 'Show Log', 'Retry');
    if (choice === 'Show Log') output.show(true);
    if (choice === 'Retry') return installServer(context);
    return undefined;
  }
}

/** The server to start: `specfill.server.path`; else the one this extension installed (reinstalled
 * when its version is not the extension's); else `specfill` on PATH; else an offer to install. */
async function findServer(context: vscode.ExtensionContext): Promise<string | undefined> {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const configured = cfg.get<string>('server.path') || '';
  if (configured) {
    if (fs.existsSync(configured)) return configured;
    const choice = await vscode.window.showErrorMessage(
      `specfill: specfill.server.path is ${configured}, which does not exist.`, 'Open Settings');
    if (choice) vscode.commands.executeCommand('workbench.action.openSettings', 'specfill.server.path');
    return undefined;
  }
  const version = context.extension.packageJSON.version as string;
  const mine = installed(context);
  if (mine?.version === version) return mine.server;
  if (mine) {
    output.appendLine(`installed server ${mine.version} is not this extension's ${version}: reinstalling`);
    return installServer(context);
  }
  const found = onPath();
  if (found) return found;
  if (!cfg.get<boolean>('server.autoInstall')) {
    showStatus('$(error) specfill: no server', 'the server is not installed', true);
    const choice = await vscode.window.showInformationMessage(
      'specfill: the server is not installed yet. Install it now? It sets up a Python environment for it and ' +
      'builds llama.cpp (4-6 minutes on 2 cores; seconds when pip finds a built wheel).', 'Install', 'Open Settings');
    if (choice === 'Open Settings') vscode.commands.executeCommand('workbench.action.openSettings', 'specfill.server');
    if (choice !== 'Install') return undefined;
  }
  return installServer(context);
}

function showStatus(text: string, tooltip: string, error = false): void {
  status.text = text;
  status.tooltip = tooltip;
  status.backgroundColor = error ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  status.show();
}

async function refreshStatus(context: vscode.ExtensionContext): Promise<void> {
  if (!client || client.state !== State.Running) return;
  try {
    const s: any = await client.sendRequest('specfill/stats', {});
    const draft = s.draft ? ` drafted by ${path.basename(s.draft.model)}` +
      (s.draft.speedup != null ? ` (${s.draft.speedup}x)` : '') : '';
    const model = (s.model ? path.basename(s.model) : 'model') + draft;
    if (lastState === 'loading' && s.state === 'ready') {
      // Keystrokes made while the model loaded got nothing: ask again where the cursor is.
      vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
    }
    lastState = s.state;
    if (s.state === 'loading') {
      showStatus('$(loading~spin) specfill: loading', `loading ${model}`);
    } else if (s.state === 'error') {
      showStatus('$(error) specfill', `error: ${s.error}`, true);
    } else {
      // The median wait for a new suggestion (not the type-through cache's instant ones).
      const latency = s.new_suggestion_ms?.n ? ` ${Math.round(s.new_suggestion_ms.p50)} ms` : '';
      const accept = s.shown ? ` ${Math.round(100 * s.accept_rate)}%` : '';
      const { icon, words } = controlState(context, vscode.window.activeTextEditor);
      const manual = vscode.workspace.getConfiguration(SECTION).get<string>('completion.trigger') === 'manual';
      const shared = s.shared ? `, shared server (${s.sessions} windows)` : '';
      showStatus(`${icon} specfill${words ? ` ${words}` : `${latency}${accept}`}`,
        `${model} (${s.family}${shared}), ${words || (manual ? 'on when asked (Alt+\\)' : 'on')}: ` +
        `a new suggestion in${latency || ' -'} (median), accepted${accept || ' -'} of shown. Click for the controls.`);
    }
  } catch {
    // a restart in progress; the next poll tells
  }
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  const exe = await findServer(context);
  if (!exe) return;
  serverExe = exe;
  // One server for every VS Code and Neovim window (`specfill attach` starts it when none
  // answers), unless server.shared is off.
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const args = cfg.get<boolean>('server.shared', true)
    ? ['attach', '--idle-exit', String(60 * cfg.get<number>('server.idleMinutes', 5))] : ['serve'];
  const serverOptions: ServerOptions = { command: exe, args };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
    initializationOptions: settings(context),
    synchronize: { configurationSection: SECTION },
    outputChannel: output,
    middleware: {
      provideInlineCompletionItems: async (document, position, ctx, token, next) => {
        // vscode-languageclient 9.0.1 passes VS Code's context through unconverted: its trigger
        // kind (Invoke 0, Automatic 1; LSP says Invoked 1, Automatic 2) and, while the suggest
        // widget is open, a vscode.Range (JSON: [start, end]) where LSP wants {start, end}.
        // A snooze is this window's alone; in manual mode only the trigger key asks (the server
        // answers nothing else either, so not asking saves the round trip).
        // A refresh (the server's answer grew) is sent as the request it renews, not as Alt+\.
        const manual = vscode.workspace.getConfiguration(SECTION).get<string>('completion.trigger') === 'manual';
        const { kind, refresh } = noteAsked(document, position, ctx.triggerKind);
        if (snoozed() || (manual && kind === vscode.InlineCompletionTriggerKind.Automatic)) return null;
        const info = ctx.selectedCompletionInfo;
        const lspContext = {
          triggerKind: kind + 1,
          selectedCompletionInfo: info && client
            ? { range: client.code2ProtocolConverter.asRange(info.range), text: info.text } : undefined,
        } as unknown as vscode.InlineCompletionContext;
        const result = await next(document, position, lspContext, token);
        const items = Array.isArray(result) ? result : result?.items;
        if (items && items.length && client && !refresh) client.sendNotification('specfill/didShow', {});
        return result;
      },
    },
  };
  client = new LanguageClient('specfill', 'specfill', serverOptions, clientOptions);
  client.registerProposedFeatures(); // textDocument/inlineCompletion is a proposed feature in 9.x
  showStatus('$(loading~spin) specfill: starting', exe);
  await client.start();
  client.onNotification('specfill/inlineCompletion/refresh', onRefresh);
  refreshStatus(context);
  sendFocus(vscode.window.activeTextEditor); // landed: the file open at start
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  status.command = 'specfill.menu';
  const changed = () => refreshStatus(context);
  context.subscriptions.push(status);
  output = vscode.window.createOutputChannel('specfill');
  const statsOutput = vscode.window.createOutputChannel('specfill stats');
  context.subscriptions.push(output, statsOutput,
    vscode.commands.registerCommand('specfill.toggle', async () => {
      if (snoozed()) {
        endSnooze();
        vscode.window.showInformationMessage('specfill: snooze ended, suggestions on');
      } else {
        const cfg = vscode.workspace.getConfiguration(SECTION);
        await cfg.update('completion.enable', !cfg.get<boolean>('completion.enable', true),
          vscode.ConfigurationTarget.Global);
      }
      changed();
    }),
    vscode.commands.registerCommand('specfill.menu', () => showMenu(context, changed)),
    vscode.commands.registerCommand('specfill.snooze', (minutes?: unknown) => askSnooze(minutes, changed)),
    vscode.commands.registerCommand('specfill.toggleLanguage', async () => {
      const language = vscode.window.activeTextEditor?.document.languageId;
      if (!language) return;
      const on = !languageOn(context, language);
      await setLanguage(language, on);
      vscode.window.showInformationMessage(`specfill: suggestions ${on ? 'on' : 'off'} for ${language}`);
      changed();
    }),
    vscode.commands.registerCommand('specfill.showStats', async () => {
      if (!client || client.state !== State.Running) {
        vscode.window.showWarningMessage('specfill: the server is not running');
        return;
      }
      statsOutput.clear();
      statsOutput.appendLine(JSON.stringify(await client.sendRequest('specfill/stats', {}), null, 2));
      statsOutput.show(true);
    }),
    vscode.commands.registerCommand('specfill.restartServer', async () => {
      if (client) {
        await client.stop().catch(() => undefined);
        client = undefined;
      }
      await startClient(context);
    }),
    vscode.commands.registerCommand('specfill.chooseModel', async () =>
      chooseModel(serverExe ?? (await findServer(context)), output)),
    vscode.commands.registerCommand('specfill.showLog', () => output.show(true)), // the server's and the installer's
    vscode.commands.registerCommand('specfill.installServer', async () => {
      if (client) {
        await client.stop().catch(() => undefined);
        client = undefined;
      }
      if (await installServer(context)) await startClient(context);
    }),
    vscode.window.onDidChangeActiveTextEditor((editor) => {
      sendFocus(editor);
      changed(); // the language in front decides what the status bar says
    }),
    vscode.window.onDidChangeTextEditorSelection((e) => sendFocus(e.textEditor)),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (e.affectsConfiguration('specfill.server.path') || e.affectsConfiguration('specfill.server.shared')) {
        await vscode.commands.executeCommand('specfill.restartServer');
      } else if (e.affectsConfiguration(SECTION)) {
        changed();
      }
    }),
  );
  poll = setInterval(changed, 2000);
  context.subscriptions.push({ dispose: () => poll && clearInterval(poll) });
  await startClient(context);
}

export async function deactivate(): Promise<void> {
  if (client) await client.stop();
}
