#!/bin/sh
# Runs once, when the postgres container initialises its volume: a database and a role for the blob
# store alone, so GPU agents can store results without any access to the event store.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE ROLE ndif_blobs LOGIN PASSWORD '${NDIF_BLOBS_PASSWORD}';
CREATE DATABASE ndif_blobs OWNER ndif_blobs;
REVOKE ALL ON DATABASE ${POSTGRES_DB} FROM PUBLIC;
SQL
