// The model menu (specfill: Choose Model): the curated list as the server knows it (`specfill
// model list --json`), a download on request with progress and cancel (`specfill model pull NAME
// --json`), then model.path, and model.draftPath when the user takes the model's draft partner.
// A failed or cancelled download leaves the model in use as it was.
import { execFile } from 'child_process';
import * as vscode from 'vscode';
import { runJsonLines } from './child';

const SECTION = 'specfill';

interface Listed {
  name: string; file: string; size_mb: number; memory_mb: number; draft: string; machine: string; pulled: boolean;
}

interface Choice extends vscode.QuickPickItem { run: () => Promise<void> }

function listModels(exe: string): Promise<Listed[]> {
  return new Promise((resolve, reject) => {
    execFile(exe, ['model', 'list', '--json'], { timeout: 30000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`could not list the models (${stderr.trim() || err.message})`));
      try {
        resolve(JSON.parse(stdout) as Listed[]);
      } catch {
        reject(new Error(`could not read the model list the server printed: ${stdout.slice(0, 200)}`));
      }
    });
  });
}

const gb = (mb: number) => `${(mb / 1000).toFixed(1)} GB`;

/** Downloads a model of the list (or resumes it) under a cancellable notification; true once whole. */
export function pullModel(exe: string, name: string, log: vscode.OutputChannel): Thenable<boolean> {
  return vscode.window.withProgress({
    location: vscode.ProgressLocation.Notification, title: `specfill: downloading ${name}`, cancellable: true,
  }, async (progress, token) => {
    let outcome: any;
    let shown = 0;
    const code = await runJsonLines(exe, ['model', 'pull', name, '--json'], log, (msg) => {
      if (msg.event !== 'progress') {
        outcome = msg;
        return;
      }
      const percent = Math.floor((100 * msg.done) / Math.max(msg.total, 1));
      progress.report({ increment: percent - shown, message: `${Math.round(msg.done / 1e6)} / ${Math.round(msg.total / 1e6)} MB` });
      shown = percent;
    }, token);
    if (outcome?.event === 'done') return true;
    if (outcome?.event === 'cancelled' || token.isCancellationRequested) {
      vscode.window.showInformationMessage(`specfill: the download of ${name} was cancelled and the model in use ` +
        'stays; choosing it again goes on from where it stopped.');
    } else {
      vscode.window.showErrorMessage(`specfill: ${outcome?.message ?? `the download stopped (exit ${code})`} ` +
        '(the model in use stays)');
    }
    return false;
  });
}

async function setModel(path: string, draft: string): Promise<void> {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  await cfg.update('model.draftPath', draft, vscode.ConfigurationTarget.Global);
  await cfg.update('model.path', path, vscode.ConfigurationTarget.Global);
}

/** A model of the list: pulled if need be, then its draft partner offered, then set. */
async function useListed(exe: string, model: Listed, all: Listed[], log: vscode.OutputChannel): Promise<void> {
  if (!model.pulled && !(await pullModel(exe, model.name, log))) return;
  const partner = all.find((m) => m.name === model.draft);
  let draft = '';
  if (partner) {
    const answer = await vscode.window.showInformationMessage(
      `specfill: ${model.name} can draft with ${partner.name} (${gb(partner.size_mb)} more to download` +
      `${partner.pulled ? ', already here' : ''}, ${gb(partner.memory_mb)} more memory): the same suggestions, ` +
      'sooner where it pays. Use it?', 'Use the draft', 'Not now');
    if (answer === 'Use the draft' && (partner.pulled || (await pullModel(exe, partner.name, log)))) draft = partner.name;
  }
  await setModel(model.name, draft);
  vscode.window.showInformationMessage(`specfill: now completing with ${model.name}` +
    `${draft ? ` drafted by ${draft}` : ''}; loading it takes a moment.`);
}

/** The menu: the list (size, memory, what machine, downloaded or not), the embedded model, a file. */
export async function chooseModel(exe: string | undefined, log: vscode.OutputChannel): Promise<void> {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const current = cfg.get<string>('model.path') || '';
  let listed: Listed[] = [];
  if (exe) {
    try {
      listed = await listModels(exe);
    } catch (err: any) {
      vscode.window.showWarningMessage(`specfill: ${err.message}`);
    }
  }
  const choices: Choice[] = listed.map((m) => ({
    label: m.name,
    description: `${gb(m.size_mb)} file, ${gb(m.memory_mb)} memory${m.pulled ? ', downloaded' : ''}` +
      `${m.name === current ? ' (in use)' : ''}`,
    detail: `${m.machine}${m.draft ? `; drafts with ${m.draft}` : ''}`,
    run: () => useListed(exe!, m, listed, log),
  }));
  choices.push(
    { label: 'SmolLM2-135M (embedded)', description: current ? '' : '(in use)',
      detail: 'the small model that comes with specfill: works offline, short suggestions',
      run: () => setModel('', '') },
    { label: 'A GGUF file on this machine...', run: async () => {
      const picked = await vscode.window.showOpenDialog({
        canSelectMany: false, filters: { 'GGUF model': ['gguf'] }, title: 'specfill: model file' });
      if (picked?.[0]) await setModel(picked[0].fsPath, '');
    } },
  );
  const picked = await vscode.window.showQuickPick(choices, {
    title: 'specfill: choose a model (downloaded from Hugging Face on request)', matchOnDetail: true });
  if (picked) await picked.run();
}
