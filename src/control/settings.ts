/**
 * A sync's settings as the control database keeps them (JSON): each kind says which it takes,
 * their shapes and defaults (SourceKind.settings).
 */
export type SyncSettings = Record<string, unknown>;

/** The name of a registered kind ('airtable', 'stripe', …). */
export type SyncKind = string;
