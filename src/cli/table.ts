/**
 * Aligned plain-text tables for people; scripts take `--json` instead. Colour only where
 * asked (a terminal), applied after padding so escapes never count towards a width.
 */

export interface Column<T> {
  header: string;
  value(item: T): string;
  /** Colours a cell already padded to its width; used only when the caller allows colour. */
  paint?(padded: string, item: T): string;
}

/** Control characters (a newline, an escape from an upstream name) would break rows or drive the terminal. */
export const printable = (text: string) => text.replace(/\p{Cc}/gu, ' ');

export function renderTable<T>(items: T[], columns: Column<T>[], options: { colour: boolean }): string {
  const cells = items.map((item) => columns.map((column) => printable(column.value(item))));
  const widths = columns.map((column, i) => Math.max(column.header.length, ...cells.map((row) => row[i]!.length)));
  const line = (texts: string[], item?: T) =>
    texts
      .map((text, i) => {
        // The last column is not padded: no trailing blanks.
        const padded = i === texts.length - 1 ? text : text.padEnd(widths[i]!);
        const paint = columns[i]!.paint;
        return options.colour && item !== undefined && paint ? paint(padded, item) : padded;
      })
      .join('  ');
  const header = line(columns.map((column) => column.header));
  return [header, ...cells.map((row, i) => line(row, items[i]))].map((l) => `${l}\n`).join('');
}
