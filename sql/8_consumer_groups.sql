-- Consumer groups of the event REST interface (CONTRACT §7, the Upstash Kafka REST shapes).
-- A group belongs to an account: two accounts may use the same group name and never meet.
-- Kept here rather than in process memory so that any process can answer any consume.

-- The live instances of a group. An instance whose last_seen is older than its session
-- timeout is removed by the next consume of another instance; its partitions move on.
-- auto_commit and auto_offset_reset are fixed when the instance is created (as Upstash's
-- Kafka-* headers are), until it is removed or expires.
CREATE TABLE consumer_group_members (
  account_id         text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  group_id           text NOT NULL,
  instance_id        text NOT NULL,
  topics             text[] NOT NULL,
  auto_commit        boolean NOT NULL,
  auto_offset_reset  text NOT NULL CHECK (auto_offset_reset IN ('earliest', 'latest', 'none')),
  session_timeout_ms int NOT NULL CHECK (session_timeout_ms > 0),
  joined_at          timestamptz NOT NULL DEFAULT now(),
  last_seen          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, group_id, instance_id)
);

-- Committed offsets, Kafka-style: the offset the group reads next in that partition.
CREATE TABLE consumer_group_offsets (
  account_id  text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  group_id    text NOT NULL,
  topic       text NOT NULL,
  partition   int NOT NULL CHECK (partition >= 0),
  committed   bigint NOT NULL CHECK (committed >= 0),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, group_id, topic, partition)
);

-- The position of the instance that holds a partition: the next offset it is given, one past
-- what it was last handed. Not committed: when the partition moves to another instance (or
-- its holder is removed without committing) the new holder starts from the committed offset.
CREATE TABLE consumer_group_positions (
  account_id  text NOT NULL,
  group_id    text NOT NULL,
  topic       text NOT NULL,
  partition   int NOT NULL,
  instance_id text NOT NULL,
  position    bigint NOT NULL CHECK (position >= 0),
  PRIMARY KEY (account_id, group_id, topic, partition),
  FOREIGN KEY (account_id, group_id, instance_id)
    REFERENCES consumer_group_members (account_id, group_id, instance_id) ON DELETE CASCADE
);
CREATE INDEX consumer_group_positions_instance_idx ON consumer_group_positions (account_id, group_id, instance_id);
