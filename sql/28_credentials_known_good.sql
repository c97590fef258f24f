-- Credentials that passed a check lately, so that the failed-credential throttle still lets
-- them through a throttled address or account after a restart. A fingerprint is the SHA-256
-- of the credential (random, high-entropy tokens and passwords), never the credential itself.
CREATE TABLE credentials_known_good (
  fingerprint text PRIMARY KEY,
  good_until timestamptz NOT NULL
);
CREATE INDEX credentials_known_good_until ON credentials_known_good (good_until);
