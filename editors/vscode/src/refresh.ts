// When the server answered with part of a line (it answers a slow line with what it has), it
// sends specfill/inlineCompletion/refresh once the line is whole; asking again where nothing
// changed since shows the whole line at once (the server's cache answers), without a keystroke.
import * as vscode from 'vscode';

interface Asked { uri: string; version: number; line: number; character: number; kind: vscode.InlineCompletionTriggerKind }

let asked: Asked | undefined; // the last request for a suggestion
let again: vscode.InlineCompletionTriggerKind | undefined; // set while the refresh's trigger runs

/** Note a request; the kind it is sent with (a refresh keeps the kind of the request it renews). */
export function noteAsked(document: vscode.TextDocument, position: vscode.Position,
  kind: vscode.InlineCompletionTriggerKind): { kind: vscode.InlineCompletionTriggerKind; refresh: boolean } {
  const refresh = again !== undefined && kind === vscode.InlineCompletionTriggerKind.Invoke;
  const sent = refresh ? again! : kind;
  again = undefined;
  asked = { uri: document.uri.toString(), version: document.version, line: position.line,
    character: position.character, kind: sent };
  return { kind: sent, refresh };
}

/** The server's refresh: ask again if the cursor and the document are where the request left them. */
export function onRefresh(params: { uri?: string }): void {
  const editor = vscode.window.activeTextEditor;
  const at = editor?.selection.active;
  if (!asked || !editor || !at || !editor.selection.isEmpty || params.uri !== asked.uri
    || editor.document.uri.toString() !== asked.uri || editor.document.version !== asked.version
    || at.line !== asked.line || at.character !== asked.character) return;
  again = asked.kind;
  vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
}
