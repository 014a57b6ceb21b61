// Everyday controls: suggestions per language, snooze, and the status-bar menu that reaches them.
// The server applies the same language, trigger and exclusion rules to every request; snooze is
// this window's alone, so it is kept here and nothing is asked while it lasts.
import * as vscode from 'vscode';

const SECTION = 'specfill';
export const DEFAULT_SNOOZE_MINUTES = 5;

let snoozedUntil: number | undefined;
let snoozeTimer: NodeJS.Timeout | undefined;

/** Minutes left of the snooze (rounded up), or undefined when not snoozed. */
export function snoozeLeft(): number | undefined {
  if (snoozedUntil === undefined) return undefined;
  return Math.max(1, Math.ceil((snoozedUntil - Date.now()) / 60000));
}

export function snoozed(): boolean {
  return snoozedUntil !== undefined;
}

export function snooze(minutes: number, changed: () => void): void {
  endSnooze();
  snoozedUntil = Date.now() + minutes * 60000;
  snoozeTimer = setTimeout(() => {
    endSnooze();
    changed();
  }, minutes * 60000);
  changed();
}

export function endSnooze(): void {
  if (snoozeTimer) clearTimeout(snoozeTimer);
  snoozeTimer = undefined;
  snoozedUntil = undefined;
}

/** The user's per-language map over the manifest's defaults, as the server reads it. */
export function languageOn(context: vscode.ExtensionContext, language: string): boolean {
  const props = context.extension.packageJSON.contributes.configuration.properties;
  const defaults = props[`${SECTION}.completion.languages`].default as Record<string, boolean>;
  const mine = vscode.workspace.getConfiguration(SECTION).get<Record<string, boolean>>('completion.languages') ?? {};
  const languages = { ...defaults, ...mine };
  return languages[language] ?? languages['*'] ?? true;
}

/** Turns one language on or off where the user keeps the setting (the workspace's if it has one). */
export async function setLanguage(language: string, on: boolean): Promise<void> {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const seen = cfg.inspect<Record<string, boolean>>('completion.languages');
  const [target, current] = seen?.workspaceValue !== undefined
    ? [vscode.ConfigurationTarget.Workspace, seen.workspaceValue]
    : [vscode.ConfigurationTarget.Global, seen?.globalValue ?? {}];
  await cfg.update('completion.languages', { ...current, [language]: on }, target);
}

/** What the status bar says about the editor in front: snoozed, off, off for its language, or on. */
export function controlState(context: vscode.ExtensionContext, editor: vscode.TextEditor | undefined):
  { icon: string; words: string } {
  const left = snoozeLeft();
  if (left !== undefined) return { icon: '$(clock)', words: `snoozed ${left}m` };
  if (!vscode.workspace.getConfiguration(SECTION).get<boolean>('completion.enable', true)) {
    return { icon: '$(circle-slash)', words: 'off' };
  }
  const language = editor?.document.languageId;
  if (language && !languageOn(context, language)) return { icon: '$(circle-slash)', words: `off (${language})` };
  return { icon: '$(sparkle)', words: '' };
}

interface Entry extends vscode.QuickPickItem { run: () => unknown }

/** The status-bar menu: the controls for the language in front, snooze, and the server's tools. */
export async function showMenu(context: vscode.ExtensionContext, changed: () => void): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const language = editor?.document.languageId;
  const entries: Entry[] = [];
  if (language) {
    const on = languageOn(context, language);
    entries.push({
      label: `${on ? 'Turn off' : 'Turn on'} for ${language}`,
      description: 'completion.languages',
      run: async () => { await setLanguage(language, !on); changed(); },
    });
  }
  entries.push(snoozed()
    ? { label: 'End snooze', run: () => { endSnooze(); changed(); } }
    : { label: `Snooze for ${DEFAULT_SNOOZE_MINUTES} minutes`, run: () => snooze(DEFAULT_SNOOZE_MINUTES, changed) });
  const enabled = vscode.workspace.getConfiguration(SECTION).get<boolean>('completion.enable', true);
  entries.push(
    { label: enabled ? 'Turn off everywhere' : 'Turn on everywhere', run: () => vscode.commands.executeCommand('specfill.toggle') },
    { label: 'Choose model', run: () => vscode.commands.executeCommand('specfill.chooseModel') },
    { label: 'Show stats', run: () => vscode.commands.executeCommand('specfill.showStats') },
    { label: 'Show log', run: () => vscode.commands.executeCommand('specfill.showLog') },
    { label: 'Restart server', run: () => vscode.commands.executeCommand('specfill.restartServer') },
  );
  const picked = await vscode.window.showQuickPick(entries, { title: 'specfill' });
  if (picked) await picked.run();
}

/** The Snooze command: minutes from the argument (a keybinding's), or asked, default 5. */
export async function askSnooze(arg: unknown, changed: () => void): Promise<void> {
  let minutes = typeof arg === 'number' ? arg : undefined;
  if (minutes === undefined) {
    const answer = await vscode.window.showInputBox({
      title: 'specfill: snooze suggestions', prompt: 'minutes', value: String(DEFAULT_SNOOZE_MINUTES),
      validateInput: (v) => (/^\d+$/.test(v.trim()) && Number(v) > 0 ? undefined : 'a whole number of minutes'),
    });
    if (answer === undefined) return;
    minutes = Number(answer);
  }
  if (!(minutes > 0)) {
    vscode.window.showErrorMessage(`specfill: snooze needs a number of minutes above 0, not ${String(arg)}`);
    return;
  }
  snooze(minutes, changed);
  vscode.window.showInformationMessage(`specfill: snoozed for ${minutes} minutes`);
}
