// Installing the specfill server from what the extension carries (server/: specfill's wheel and
// the installer script): a Python 3.11+ environment in the extension's global storage, llama.cpp
// built with the project's flags (or a built wheel pip finds), the default model. The installer
// writes installed.json last, so a server is used only once it is whole.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { runJsonLines } from './child';

const PYTHONS = ['python3.13', 'python3.12', 'python3.11', 'python3', 'python'];

export interface Installed {
  version: string;
  server: string;
  build?: string;
}

export function installDir(context: vscode.ExtensionContext): string {
  return path.join(context.globalStorageUri.fsPath, 'server');
}

/** The server this extension installed, if it is whole. */
export function installed(context: vscode.ExtensionContext): Installed | undefined {
  try {
    const info = JSON.parse(fs.readFileSync(path.join(installDir(context), 'installed.json'), 'utf8'));
    return fs.existsSync(info.server) ? info : undefined;
  } catch {
    return undefined;
  }
}

function pythonVersion(exe: string): [number, number] | undefined {
  try {
    const out = execFileSync(exe, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'],
      { encoding: 'utf8', timeout: 10000 }).trim();
    const [major, minor] = out.split('.').map(Number);
    return [major, minor];
  } catch {
    return undefined;
  }
}

/** A Python 3.11+ to install with: the setting, else the first good one on PATH. */
export function findPython(configured: string): string {
  const seen: string[] = [];
  for (const exe of configured ? [configured] : PYTHONS) {
    const v = pythonVersion(exe);
    if (v && (v[0] > 3 || (v[0] === 3 && v[1] >= 11))) return exe;
    if (v) seen.push(`${exe} ${v[0]}.${v[1]}`);
  }
  const found = seen.length ? ` (found: ${seen.join(', ')})` : '';
  if (configured) {
    throw new Error(`specfill.server.python is ${configured}, which is not a Python 3.11 or newer${found}. ` +
      'Point it at one, or clear it to use the first one on PATH.');
  }
  throw new Error(`specfill needs Python 3.11 or newer to install its server, and none is on PATH${found}. ` +
    'Install one (python.org, or your system\'s package manager), or set specfill.server.python to its path.');
}

/** Run the installer with a cancellable progress notification; resolves with the server installed. */
export function install(context: vscode.ExtensionContext, python: string, log: vscode.OutputChannel): Thenable<Installed> {
  const bundled = path.join(context.extensionPath, 'server');
  const wheel = fs.readdirSync(bundled).find((f) => f.startsWith('specfill-') && f.endsWith('.whl'));
  if (!wheel) throw new Error(`the extension carries no specfill wheel in ${bundled}: reinstall the extension`);
  const dir = installDir(context);
  return vscode.window.withProgress({
    location: vscode.ProgressLocation.Notification, title: 'specfill: installing the server', cancellable: true,
  }, async (progress, token) => {
    const t0 = Date.now();
    log.appendLine(`installing into ${dir} with ${python}`);
    let outcome: any;
    const code = await runJsonLines(python, [path.join(bundled, 'specfill_install.py'), '--dir', dir, '--wheel',
      path.join(bundled, wheel)], log, (msg) => {
      if (msg.step) progress.report({ message: `${msg.message} — ${Math.round((Date.now() - t0) / 1000)} s` });
      else outcome = msg;
    }, token);
    if (code === 0 && outcome?.done) return outcome as Installed;
    throw new Error(outcome?.error ?? `the installer stopped (exit ${code}); see the specfill log`);
  });
}
