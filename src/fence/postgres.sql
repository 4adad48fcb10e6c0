-- Fencing in PostgreSQL: one row per fenced resource holds the highest fencing token that wrote
-- to it. Every fenced transaction advances the row first; a stale token advances nothing.
-- The statements use psql's variables (:'resource', :token); the Rust helper binds them as
-- $1 and $2. Sections start at "-- name:" lines.

-- name: schema
CREATE TABLE IF NOT EXISTS leasehold_fence (
    resource text PRIMARY KEY,
    token bigint NOT NULL CHECK (token >= 0)
);

-- name: advance
INSERT INTO leasehold_fence AS f (resource, token) VALUES (:'resource', :token)
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token
WHERE f.token <= EXCLUDED.token;

-- name: seen
SELECT token FROM leasehold_fence WHERE resource = :'resource';

-- name: refuse
DO $$ BEGIN RAISE EXCEPTION 'a stale fencing token: this transaction must not commit'; END $$;
