// A child process that reports in JSON lines (the server's installer, `specfill model pull`):
// each JSON line goes to onMessage, the rest of its output to the log; cancelling sends SIGTERM,
// on which both stop cleanly and leave nothing half-made in use.
import { spawn } from 'child_process';
import * as readline from 'readline';
import * as vscode from 'vscode';

export function runJsonLines(command: string, args: string[], log: vscode.OutputChannel,
  onMessage: (msg: any) => void, token?: vscode.CancellationToken): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: process.env });
    token?.onCancellationRequested(() => child.kill('SIGTERM'));
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      let msg: any;
      try {
        msg = JSON.parse(line);
      } catch {
        log.appendLine(line);
        return;
      }
      if (msg?.event !== 'progress') log.appendLine(line); // progress goes to the notification only
      onMessage(msg);
    });
    child.stderr!.on('data', (data) => log.append(String(data)));
    child.on('error', (err) => reject(new Error(`could not run ${command}: ${err.message}`)));
    child.on('close', (code) => resolve(code));
  });
}
