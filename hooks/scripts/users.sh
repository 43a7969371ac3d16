#!/bin/bash
# users.sh -- Job.  Makes the application accounts of spec.users exist on the
# primary exactly as declared, idempotently, so that applications never need
# root:
#   USERS      "name:database:rw|ro ..." (the hook checked the names)
#   USERS_DIR  a directory with one file per user, named after it, holding its
#              password (the password Secrets, projected)
#   PRIMARY    the recorded primary; the accounts are made there and replicate
# For every user: the database is created if missing, the account `name`@'%'
# is created or its password set, every privilege revoked and the declared ones
# granted on its database (rw: ALL PRIVILEGES; ro: SELECT, SHOW VIEW).  The
# accounts this script made are listed in _mysqlhook.users; one listed there
# and no longer declared is dropped.  No other account is ever touched.
# The statements carry passwords: they go over stdin (common.sh `sql`).
# Result: {"result":"users-applied","primary","users":[..],"dropped":[..]};
# errors: bad-env, not-primary (PRIMARY is not the writable primary: the hook
# retries), primary-unreachable.
SCRIPT_NAME=users
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

primary=${PRIMARY:-}
is_member "$primary" || fail bad-env "PRIMARY '$primary' is not in PODS"
[ -d "${USERS_DIR:-}" ] || fail bad-env "USERS_DIR '${USERS_DIR:-}' is not a directory"
r_str primary "$primary"

declare -A WANT=()
names=()
for u in ${USERS:-}; do
  IFS=: read -r name db access <<< "$u"
  [[ $name =~ ^[a-z][a-z0-9_]{0,31}$ ]] || fail bad-env "user name '$name' is not [a-z][a-z0-9_]{0,31}"
  [[ $db =~ ^[A-Za-z0-9_]{1,64}$ ]] || fail bad-env "database '$db' of $name is not [A-Za-z0-9_]{1,64}"
  # A system schema in any spelling: with lower_case_table_names `MySQL` is `mysql`.
  case ${db,,} in mysql|sys|information_schema|performance_schema|_mysqlhook)
    fail bad-env "database '$db' of $name is a system schema" ;;
  esac
  case $access in rw|ro) ;; *) fail bad-env "access '$access' of $name is not rw or ro" ;; esac
  [ -r "$USERS_DIR/$name" ] || fail bad-env "no password file $USERS_DIR/$name"
  WANT[$name]="$db:$access"
  names+=("$name")
done

wait_reachable "$primary" 60 || fail primary-unreachable "$primary does not answer"
sql_replica_status "$primary"
if [ "$(sql_is_read_only "$primary")" != 0 ] || [ "$RS_CONFIGURED" = 1 ]; then
  fail not-primary "$primary is not the writable primary; the hook retries"
fi

# The statements of one user.  MySQL (RM 15.7.1.3, 15.7.1.1, 15.7.1.6,
# 15.7.1.8) and MariaDB accept the same ones.
user_sql() {
  local name=$1 db=$2 access=$3 pw
  IFS= read -r -d '' pw < "$USERS_DIR/$name" || true
  pw=${pw%$'\n'}
  [ -n "$pw" ] || fail bad-env "the password of $name is empty"
  local q u pattern
  u="'$name'@'%'"
  # In GRANT ... ON `db`.* the name is a pattern: `_` and `%` are wildcards
  # (`my_ql` would match `mysql`), so a literal `_` is granted as `\_`.
  pattern=${db//_/\\_}
  q="CREATE DATABASE IF NOT EXISTS \`$db\`;"
  q+="CREATE USER IF NOT EXISTS $u IDENTIFIED BY $(sql_quote "$pw");"
  q+="ALTER USER $u IDENTIFIED BY $(sql_quote "$pw");"
  q+="REVOKE ALL PRIVILEGES, GRANT OPTION FROM $u;"
  case $access in
    rw) q+="GRANT ALL PRIVILEGES ON \`$pattern\`.* TO $u;" ;;
    ro) q+="GRANT SELECT, SHOW VIEW ON \`$pattern\`.* TO $u;" ;;
  esac
  q+="INSERT IGNORE INTO _mysqlhook.users (name) VALUES ($(sql_quote "$name"));"
  printf '%s' "$q"
}

sql "$primary" "CREATE DATABASE IF NOT EXISTS _mysqlhook;
  CREATE TABLE IF NOT EXISTS _mysqlhook.users (name VARCHAR(32) PRIMARY KEY)"
for name in "${names[@]}"; do
  IFS=: read -r db access <<< "${WANT[$name]}"
  sql "$primary" "$(user_sql "$name" "$db" "$access")"
  log "user $name: $access on $db"
done

# Accounts made here before and no longer declared.
dropped=()
while IFS= read -r name; do
  [[ $name =~ ^[a-z][a-z0-9_]{0,31}$ ]] || continue   # only what this script wrote
  [ -n "${WANT[$name]+x}" ] && continue
  sql "$primary" "DROP USER IF EXISTS '$name'@'%'; DELETE FROM _mysqlhook.users WHERE name = $(sql_quote "$name")"
  dropped+=("$name")
  log "user $name dropped: no longer declared"
done < <(sql "$primary" "SELECT name FROM _mysqlhook.users ORDER BY name")

r_arr users "${names[@]}"
r_arr dropped "${dropped[@]}"
finish users-applied 0
