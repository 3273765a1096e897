#!/usr/bin/env bash
# A real local Spark standalone cluster (1 master + N workers) on 127.0.0.1, launched with
# the pyspark package's own Spark distribution (SPARK_HOME = the pyspark package dir).
#
#   infra/cluster.sh start [--workers N]   start (idempotent), wait for master + N workers
#   infra/cluster.sh status                print state; exit 0 if up, 3 if not
#   infra/cluster.sh stop                  stop the workers and the master (by pid file)
#
# Point the jobs at it with LAKECEP_SPARK_MASTER=spark://127.0.0.1:7077 (docs/cluster.md).
# Pid files and logs: $LAKECEP_HOME/cluster. Ports (override with the env vars):
#   master RPC        LAKECEP_SPARK_MASTER_PORT        7077
#   master web UI     LAKECEP_SPARK_MASTER_UI_PORT     8090  (8080 is the Airflow UI)
#   worker i web UI   LAKECEP_SPARK_WORKER_UI_PORT+i-1 8091, 8092, ...
# Worker size: LAKECEP_SPARK_WORKER_CORES (1), LAKECEP_SPARK_WORKER_MEMORY (1g).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export LAKECEP_HOME=${LAKECEP_HOME:-$ROOT/.lakecep}
PYTHON=${LAKECEP_PYTHON_BIN:-$ROOT/.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)
HOST=127.0.0.1
MASTER_PORT=${LAKECEP_SPARK_MASTER_PORT:-7077}
MASTER_UI_PORT=${LAKECEP_SPARK_MASTER_UI_PORT:-8090}
WORKER_UI_PORT=${LAKECEP_SPARK_WORKER_UI_PORT:-8091}
WORKER_CORES=${LAKECEP_SPARK_WORKER_CORES:-1}
WORKER_MEMORY=${LAKECEP_SPARK_WORKER_MEMORY:-1g}
START_TIMEOUT=${LAKECEP_CLUSTER_START_TIMEOUT:-90}
CLUSTER_DIR=$LAKECEP_HOME/cluster
MASTER_URL=spark://$HOST:$MASTER_PORT
MASTER_JSON=http://$HOST:$MASTER_UI_PORT/json/
MASTER_CLASS=org.apache.spark.deploy.master.Master
WORKER_CLASS=org.apache.spark.deploy.worker.Worker

usage() { echo "usage: $0 start|stop|status [--workers N]" >&2; exit 2; }

spark_home() {
  "$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))'
}

# pid_alive PIDFILE CLASS: the pid in PIDFILE is running and is that Spark daemon.
pid_alive() {
  local pidfile=$1 class=$2 pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$class"
}

# launch NAME CLASS ARGS...: run spark-class CLASS in the background, detached (own session),
# stdout+stderr to $CLUSTER_DIR/NAME.log; the process writes its own pid before exec'ing,
# so the pid file holds the JVM's pid (spark-class ends with exec java).
launch() {
  local name=$1; shift
  local log=$CLUSTER_DIR/$name.log pidfile=$CLUSTER_DIR/$name.pid
  echo "starting $name (log: $log)"
  nohup setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" \
    "$SPARK_HOME/bin/spark-class" "$@" >"$log" 2>&1 </dev/null &
  local waited=0
  while [ ! -s "$pidfile" ] && [ $waited -lt 50 ]; do sleep 0.1; waited=$((waited + 1)); done
}

# master_state: "<status> <alive workers>" from the master's JSON, or nothing if down.
master_state() {
  curl -fsS --max-time 2 "$MASTER_JSON" 2>/dev/null | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
alive = [w for w in d.get("workers", []) if w.get("state") == "ALIVE"]
print(d.get("status", "?"), len(alive))
' 2>/dev/null || true
}

port_in_use() {
  "$PYTHON" - "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.settimeout(0.5)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)
EOF
}

tail_logs() {
  for log in "$CLUSTER_DIR"/*.log; do
    [ -f "$log" ] || continue
    echo "---- last lines of $log" >&2
    tail -n 25 "$log" >&2
  done
}

cmd_start() {
  local workers=$1
  command -v java >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ] ||
    { echo "error: java not found (run infra/bootstrap.sh)" >&2; exit 1; }
  SPARK_HOME=$(spark_home)
  export SPARK_HOME
  [ -x "$SPARK_HOME/bin/spark-class" ] ||
    { echo "error: $SPARK_HOME/bin/spark-class missing (pyspark not installed fully?)" >&2; exit 1; }
  # Bind everything (RPC, block manager, web UIs) to loopback; executors run this python.
  export SPARK_LOCAL_IP=$HOST SPARK_PUBLIC_DNS=$HOST
  export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$PYTHON}
  export SPARK_LOG_DIR=$CLUSTER_DIR SPARK_WORKER_DIR=$CLUSTER_DIR/work
  mkdir -p "$CLUSTER_DIR/work"

  if pid_alive "$CLUSTER_DIR/master.pid" "$MASTER_CLASS"; then
    echo "master already running (pid $(cat "$CLUSTER_DIR/master.pid"))"
  else
    for port in "$MASTER_PORT" "$MASTER_UI_PORT"; do
      if port_in_use "$port"; then
        echo "error: port $port on $HOST is already in use by another process" >&2; exit 1
      fi
    done
    launch master "$MASTER_CLASS" --host "$HOST" --port "$MASTER_PORT" \
      --webui-port "$MASTER_UI_PORT"
  fi

  local i
  for ((i = 1; i <= workers; i++)); do
    if pid_alive "$CLUSTER_DIR/worker-$i.pid" "$WORKER_CLASS"; then
      echo "worker-$i already running (pid $(cat "$CLUSTER_DIR/worker-$i.pid"))"
    else
      launch "worker-$i" "$WORKER_CLASS" "$MASTER_URL" --host "$HOST" \
        --cores "$WORKER_CORES" --memory "$WORKER_MEMORY" \
        --webui-port $((WORKER_UI_PORT + i - 1)) --work-dir "$CLUSTER_DIR/work/worker-$i"
    fi
  done

  local deadline=$((SECONDS + START_TIMEOUT)) state status alive
  while :; do
    state=$(master_state)
    status=${state% *}; alive=${state#* }
    if [ "$status" = "ALIVE" ] && [ "${alive:-0}" -ge "$workers" ]; then
      echo "cluster up: $MASTER_URL, $alive worker(s) alive, UI http://$HOST:$MASTER_UI_PORT"
      return 0
    fi
    if ! pid_alive "$CLUSTER_DIR/master.pid" "$MASTER_CLASS"; then
      echo "error: the Spark master exited" >&2; tail_logs; exit 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "error: cluster not ready after ${START_TIMEOUT}s (master: ${state:-no answer})" >&2
      tail_logs; exit 1
    fi
    sleep 1
  done
}

stop_pidfile() {
  local pidfile=$1 class=$2 name pid waited=0
  name=$(basename "$pidfile" .pid)
  if pid_alive "$pidfile" "$class"; then
    pid=$(cat "$pidfile")
    echo "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null && [ $waited -lt 150 ]; do sleep 0.1; waited=$((waited + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
      echo "$name did not stop after 15s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidfile"
}

cmd_stop() {
  local pidfile
  for pidfile in "$CLUSTER_DIR"/worker-*.pid; do
    [ -f "$pidfile" ] && stop_pidfile "$pidfile" "$WORKER_CLASS"
  done
  stop_pidfile "$CLUSTER_DIR/master.pid" "$MASTER_CLASS"
  echo "cluster stopped"
}

cmd_status() {
  local up=0 pidfile
  if pid_alive "$CLUSTER_DIR/master.pid" "$MASTER_CLASS"; then
    echo "master   running (pid $(cat "$CLUSTER_DIR/master.pid")) $MASTER_URL"
    up=1
  else
    echo "master   not running"
  fi
  for pidfile in "$CLUSTER_DIR"/worker-*.pid; do
    [ -f "$pidfile" ] || continue
    if pid_alive "$pidfile" "$WORKER_CLASS"; then
      echo "$(basename "$pidfile" .pid) running (pid $(cat "$pidfile"))"
    else
      echo "$(basename "$pidfile" .pid) not running (stale pid file)"
    fi
  done
  if [ $up = 1 ]; then
    curl -fsS --max-time 2 "$MASTER_JSON" 2>/dev/null | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
alive = [w for w in d.get("workers", []) if w.get("state") == "ALIVE"]
print("status   %s: %d worker(s) alive, %s cores, %d running app(s), %d completed app(s)" % (
    d.get("status"), len(alive), d.get("cores"),
    len(d.get("activeapps", [])), len(d.get("completedapps", []))))
' || echo "status   master web UI $MASTER_JSON not answering"
    return 0
  fi
  return 3
}

action=${1:-}
[ -n "$action" ] || usage
shift
workers=1
while [ $# -gt 0 ]; do
  case $1 in
    --workers) [ $# -ge 2 ] || usage; workers=$2; shift 2 ;;
    --workers=*) workers=${1#--workers=}; shift ;;
    *) usage ;;
  esac
done
[[ $workers =~ ^[1-9][0-9]*$ ]] || { echo "error: --workers needs a positive integer" >&2; exit 2; }

case $action in
  start) cmd_start "$workers" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) usage ;;
esac
