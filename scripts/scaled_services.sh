#!/usr/bin/env bash
# Local PostgreSQL and Redis for trying the scaled setup on one machine (and for its tests).
#
#   scripts/scaled_services.sh start   install (Debian packages) when missing, start on loopback,
#                                      create the role and database; print `export ...` lines
#   scripts/scaled_services.sh env     print the `export ...` lines only
#   scripts/scaled_services.sh stop    stop the Redis this script started and the PostgreSQL cluster
#
# Use:  eval "$(scripts/scaled_services.sh start)"
# Settings (environment): KB_PG_DB, KB_PG_USER, KB_PG_PASSWORD (all default kbsite),
# KB_REDIS_PORT (6379). Progress goes to stderr; only the export lines go to stdout.
set -euo pipefail

cd "$(dirname "$0")/.."
DB=${KB_PG_DB:-kbsite}
USER_=${KB_PG_USER:-kbsite}
PASSWORD=${KB_PG_PASSWORD:-kbsite}
REDIS_PORT=${KB_REDIS_PORT:-6379}
VAR=$PWD/var

log() { echo "scaled_services: $*" >&2; }

as_root() {
    if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo -n "$@"; fi
}

# Runs a command as the postgres system user.
as_postgres() {
    if [[ $(id -un) == postgres ]]; then
        "$@"
    elif [[ $(id -u) -eq 0 ]] && command -v runuser >/dev/null; then
        runuser -u postgres -- "$@"
    else
        sudo -n -u postgres "$@"
    fi
}

# The newest installed cluster: "VERSION NAME PORT STATUS".
cluster() {
    pg_lsclusters -h 2>/dev/null | sort -V | tail -n 1 | awk '{print $1, $2, $3, $4}'
}

pg_port() {
    local c
    c=$(cluster)
    [[ -n $c ]] && echo "$c" | awk '{print $3}' || echo 5432
}

print_env() {
    echo "export DATABASE_URL=postgres://$USER_:$PASSWORD@127.0.0.1:$(pg_port)/$DB"
    echo "export REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0"
}

start_postgres() {
    local c ver name port status
    c=$(cluster)
    if [[ -z $c ]]; then
        ver=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
        log "creating PostgreSQL $ver cluster 'main'"
        as_root pg_createcluster "$ver" main >&2
        c=$(cluster)
    fi
    read -r ver name port status <<<"$c"
    if [[ $status != online* ]]; then
        log "starting PostgreSQL $ver/$name on port $port"
        as_root pg_ctlcluster "$ver" "$name" start >&2
    fi
    for _ in $(seq 1 30); do
        pg_isready -q -h 127.0.0.1 -p "$port" && break
        sleep 1
    done
    pg_isready -q -h 127.0.0.1 -p "$port" || { log "PostgreSQL did not come up"; exit 1; }

    local psql=(psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d postgres -tA)
    if [[ -z $(as_postgres "${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname = '$USER_'") ]]
    then
        log "creating role $USER_"
        # CREATEDB: pytest-django creates and drops its test database.
        as_postgres "${psql[@]}" -c "CREATE ROLE \"$USER_\" LOGIN CREATEDB PASSWORD '$PASSWORD'"
    else
        # The role may come from an earlier start with other settings: make the URL we print true.
        as_postgres "${psql[@]}" -c "ALTER ROLE \"$USER_\" LOGIN CREATEDB PASSWORD '$PASSWORD'"
    fi
    if [[ -z $(as_postgres "${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$DB'") ]]
    then
        log "creating database $DB"
        as_postgres "${psql[@]}" -c "CREATE DATABASE \"$DB\" OWNER \"$USER_\""
    fi
}

redis_up() {
    [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]
}

start_redis() {
    if redis_up; then
        return
    fi
    mkdir -p "$VAR/redis" "$VAR/log"
    log "starting Redis on 127.0.0.1:$REDIS_PORT"
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes \
        --dir "$VAR/redis" --pidfile "$VAR/redis/redis.pid" --logfile "$VAR/log/redis.log" \
        --save '' --appendonly no >&2
    for _ in $(seq 1 30); do
        redis_up && return
        sleep 0.2
    done
    log "Redis did not come up (see var/log/redis.log)"
    exit 1
}

case ${1:-start} in
start)
    scripts/install_system_deps.sh postgresql redis-server:redis-server >&2
    start_postgres
    start_redis
    print_env
    ;;
env)
    print_env
    ;;
stop)
    if [[ -f $VAR/redis/redis.pid ]]; then
        kill "$(cat "$VAR/redis/redis.pid")" 2>/dev/null || true
        rm -f "$VAR/redis/redis.pid"
    fi
    c=$(cluster)
    if [[ -n $c ]]; then
        read -r ver name _ _ <<<"$c"
        as_root pg_ctlcluster "$ver" "$name" stop >&2 || true
    fi
    ;;
*)
    echo "usage: $0 start|env|stop" >&2
    exit 2
    ;;
esac
