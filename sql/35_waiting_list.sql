-- Waiting lists (docs/management-api.md#waiting-lists): kinds of sync an operator keeps behind
-- one (TRIBUTARY_WAITING_LIST_KINDS). An account that tries to make such a sync while not
-- admitted is put on the list (admitted_at NULL); the operator admits it (admitted_at set) or
-- removes the row. Existing syncs are never touched by either.
CREATE TABLE waiting_list (
  account_id  text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  kind        text NOT NULL,
  asked_at    timestamptz NOT NULL DEFAULT now(),
  admitted_at timestamptz,
  PRIMARY KEY (kind, account_id)
);
CREATE INDEX waiting_list_account_idx ON waiting_list (account_id);
