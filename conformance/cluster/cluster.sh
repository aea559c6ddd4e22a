#!/usr/bin/env bash
# Starts and stops the real test clusters on loopback: "provider" and "app", and
# any more that `up --cluster NAME` asks for (the conformance suite adds
# "reference").
# Each cluster is its own etcd, kube-apiserver and kube-controller-manager, with
# real TLS, RBAC, a service-account issuer and a front-proxy CA for aggregation.
# `--node NAME` gives that cluster a node that runs pods (node.sh).
#
#   cluster.sh up     [--run-dir DIR] [--owner-pid PID] [--cluster NAME]... [--node NAME]
#                                                         start (no-op if already up)
#   cluster.sh down   [--run-dir DIR]                     stop  (no-op if already down)
#   cluster.sh status [--run-dir DIR]                     exit 0 iff every cluster is ready
#   cluster.sh env    [--run-dir DIR]                     print the env file
#
# --owner-pid: stop the clusters as soon as that process is gone (tests pass
#   their own pid, so a killed test run leaves nothing behind).
# --cluster: the clusters to run (default: provider app); `up` records them in
#   the run dir, and `down`/`status` act on the recorded ones.
# --node: one of those clusters gets a node (containerd, kubelet, kube-proxy,
#   kube-scheduler; one per machine); its clusters then listen on every address.
# Env: BINDERY_BIN   the bindery binary that makes certificates (default: cargo build)
#      KUBECTL       kubectl to use (default: kubectl.1.33 if present, else kubectl)
#      BINDERY_CACHE_DIR  where build.sh caches binaries
#      BINDERY_APISERVER_EXTRA_ARGS  extra kube-apiserver flags (word-split)
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

cmd=${1:-}
[ $# -gt 0 ] && shift
run_dir=$repo/.run
owner_pid=
wanted=()
wanted_node=
while [ $# -gt 0 ]; do
  case $1 in
    --run-dir) run_dir=$2; shift 2 ;;
    --owner-pid) owner_pid=$2; shift 2 ;;
    --cluster) wanted+=("$2"); shift 2 ;;
    --node) wanted_node=$2; shift 2 ;;
    *) echo "cluster.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$run_dir"
run_dir=$(cd "$run_dir" && pwd)
[ ${#wanted[@]} -gt 0 ] || wanted=(provider app)
# The clusters the run dir holds: those the last `up` recorded, else the wanted ones.
if [ -f "$run_dir/clusters" ]; then
  read -r -a clusters <"$run_dir/clusters"
else
  clusters=("${wanted[@]}")
fi
node_cluster=$(cat "$run_dir/node-cluster" 2>/dev/null || true)
# shellcheck source=node.sh
source "$here/node.sh"

kubectl_bin() {
  if [ -n "${KUBECTL:-}" ]; then echo "$KUBECTL"; return; fi
  local versioned=/usr/lib/google-cloud-sdk/bin/kubectl.1.33
  if [ -x "$versioned" ]; then echo "$versioned"; else command -v kubectl; fi
}

# Prints N distinct free loopback ports, outside the kernel's ephemeral
# range: a port the kernel picked (bind to 0) is free only until the next
# outgoing connection takes it as its source port, which on a busy machine
# came before etcd bound it ("address already in use").
free_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
ranges = [r for r in ((10000, low - 1), (high + 1, 65535)) if r[1] - r[0] > 1000]
socks = []
while len(socks) < int(sys.argv[1]):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randint(*random.choice(ranges)) if ranges else 0))
    except OSError:
        s.close()
        continue
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# Is the process in pidfile $1 alive and one of ours (its command line names the run dir)?
alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1")
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$run_dir"
}

# Stops the processes of the given pidfiles together: TERM to all, then KILL
# whatever still runs after 10 s.
stop_pidfiles() {
  local pids=() pidfile pid
  for pidfile in "$@"; do
    if alive "$pidfile"; then pids+=("$(cat "$pidfile")"); fi
  done
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 1 100); do
      local running=0
      for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && running=1; done
      [ $running = 0 ] && break
      sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  rm -f "$@"
}

log_tail() {
  echo "---- last lines of $1 ----" >&2
  tail -n 40 "$1" >&2 || true
  echo "----" >&2
}

cluster_ready() { # cluster
  local dir=$run_dir/$1
  for component in etcd kube-apiserver kube-controller-manager; do
    alive "$dir/$component.pid" || return 1
  done
  "$(kubectl_bin)" --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1
}

status() {
  for c in "${clusters[@]}"; do cluster_ready "$c" || return 1; done
  if [ -n "$node_cluster" ]; then node_status || return 1; fi
}

down() {
  # The watchdog calls `down` itself; never kill the caller.
  if [ -f "$run_dir/watchdog.pid" ] && [ "$(cat "$run_dir/watchdog.pid")" != "${BINDERY_WATCHDOG_SELF:-}" ]; then
    stop_pidfiles "$run_dir/watchdog.pid"
  fi
  rm -f "$run_dir/env"
  node_down
  local pidfiles=()
  for c in "${clusters[@]}"; do
    for component in kube-controller-manager kube-apiserver etcd; do
      pidfiles+=("$run_dir/$c/$component.pid")
    done
  done
  stop_pidfiles "${pidfiles[@]}"
  # Last, so that a run starting now sees a teardown under way (wait_for_teardown).
  rm -f "$run_dir/watchdog.pid" "$run_dir/watchdog.owner"
}

# start_process NAME LOG PIDFILE CMD...: start detached, record the pid.
start_process() {
  local log=$2 pidfile=$3
  shift 3
  setsid nohup "$@" >"$log" 2>&1 </dev/null 9>&- &
  echo $! >"$pidfile"
}

# wait_for DESCRIPTION LOG PIDFILE SECONDS CHECK...: poll CHECK until it succeeds.
wait_for() {
  local what=$1 log=$2 pidfile=$3 seconds=$4
  shift 4
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if ! alive "$pidfile"; then
      echo "cluster.sh: $what exited during start-up" >&2
      log_tail "$log"
      return 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "cluster.sh: $what not ready after ${seconds}s" >&2
      log_tail "$log"
      return 1
    fi
    sleep 0.2
  done
}

write_kubeconfig() { # file server ca cert key user
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: $2
    certificate-authority: $3
users:
- name: $6
  user:
    client-certificate: $4
    client-key: $5
contexts:
- name: $6
  context:
    cluster: cluster
    user: $6
current-context: $6
EOF
}

etcd_healthy() { python3 -c "import urllib.request,sys; sys.exit(0 if b'\"health\":\"true\"' in urllib.request.urlopen('$1/health', timeout=2).read() else 1)"; }

start_cluster() { # cluster
  local c=$1 dir=$run_dir/$1 pki=$run_dir/pki/$1
  local etcd_port peer_port api_port
  read -r etcd_port peer_port api_port < <(free_ports 3)
  rm -rf "$dir"
  mkdir -p "$dir"
  local etcd_url=http://127.0.0.1:$etcd_port server=https://127.0.0.1:$api_port

  # etcd: loopback only; fsync is off because these clusters are thrown away.
  start_process etcd "$dir/etcd.log" "$dir/etcd.pid" "$ETCD_BIN_DIR/etcd" \
    --name "$c" --data-dir "$dir/etcd-data" \
    --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "$c=http://127.0.0.1:$peer_port" \
    --unsafe-no-fsync --log-level warn
  wait_for "$c etcd" "$dir/etcd.log" "$dir/etcd.pid" 30 etcd_healthy "$etcd_url"

  # With a node, pods reach the kube-apiservers at the node's address.
  local bind=127.0.0.1 advertise=127.0.0.1 reconciler=none
  if [ -n "$node_cluster" ]; then bind=0.0.0.0; fi
  # The node cluster's `kubernetes` Service leads to it, as in a real cluster.
  if [ "$node_cluster" = "$c" ]; then advertise=$NODE_IP reconciler=lease; fi
  local apiserver=(
    "$KUBE_BIN_DIR/kube-apiserver"
    --etcd-servers "$etcd_url"
    --bind-address "$bind" --advertise-address "$advertise" --secure-port "$api_port"
    --cert-dir "$dir/apiserver-certs"
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key"
    --client-ca-file "$pki/ca.crt"
    --authorization-mode RBAC
    --service-account-issuer "$server"
    --service-account-key-file "$pki/sa.pub"
    --service-account-signing-key-file "$pki/sa.key"
    --service-cluster-ip-range 10.0.0.0/24
    --requestheader-client-ca-file "$pki/front-proxy-ca.crt"
    --requestheader-allowed-names front-proxy-client
    --requestheader-username-headers X-Remote-User
    --requestheader-uid-headers X-Remote-Uid
    --requestheader-group-headers X-Remote-Group
    --requestheader-extra-headers-prefix X-Remote-Extra-
    --proxy-client-cert-file "$pki/front-proxy-client.crt"
    --proxy-client-key-file "$pki/front-proxy-client.key"
    --endpoint-reconciler-type "$reconciler"
    --profiling=false
  )
  # Logs and port-forwards reach the node's kubelet at its address (the
  # node's name is no DNS name here).
  if [ "$node_cluster" = "$c" ]; then apiserver+=(--kubelet-preferred-address-types InternalIP); fi
  # shellcheck disable=SC2206 # extra flags are word-split on purpose
  apiserver+=(${BINDERY_APISERVER_EXTRA_ARGS:-})
  # Tests start a second kube-apiserver of the same cluster (same etcd) from
  # this command line, to restart one without disturbing the others.
  printf '%s\0' "${apiserver[@]}" >"$dir/kube-apiserver.args"
  start_process kube-apiserver "$dir/kube-apiserver.log" "$dir/kube-apiserver.pid" \
    "${apiserver[@]}"
  write_kubeconfig "$dir/admin.kubeconfig" "$server" "$pki/ca.crt" \
    "$pki/admin.crt" "$pki/admin.key" admin
  wait_for "$c kube-apiserver" "$dir/kube-apiserver.log" "$dir/kube-apiserver.pid" 90 \
    "$(kubectl_bin)" --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz

  local controllers='*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-ephemeral-volume,-pvc-protection,-pv-protection,-ttl'
  # The node's cluster lifts the node's not-ready taint and watches its
  # health, as a real one does.
  if [ "$node_cluster" = "$c" ]; then controllers=${controllers/,-nodelifecycle/}; fi
  write_kubeconfig "$dir/controller-manager.kubeconfig" "$server" "$pki/ca.crt" \
    "$pki/controller-manager.crt" "$pki/controller-manager.key" system:kube-controller-manager
  start_process kube-controller-manager "$dir/kube-controller-manager.log" \
    "$dir/kube-controller-manager.pid" \
    "$KUBE_BIN_DIR/kube-controller-manager" \
    --kubeconfig "$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 0 \
    --leader-elect=false \
    --use-service-account-credentials \
    --service-account-private-key-file "$pki/sa.key" \
    --root-ca-file "$pki/ca.crt" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --service-cluster-ip-range 10.0.0.0/24 \
    --controllers "$controllers"
  # The controller-manager is ready once it has published the root CA into
  # the default namespace, which shows its informers and clients work.
  wait_for "$c kube-controller-manager" "$dir/kube-controller-manager.log" \
    "$dir/kube-controller-manager.pid" 60 \
    "$(kubectl_bin)" --kubeconfig "$dir/admin.kubeconfig" -n default get configmap kube-root-ca.crt
  echo "$server" >"$dir/server"
}

write_env() {
  {
    echo "BINDERY_RUN_DIR=$run_dir"
    echo "BINDERY_PKI_DIR=$run_dir/pki"
    for c in "${clusters[@]}"; do
      local upper
      upper=$(echo "$c" | tr '[:lower:]' '[:upper:]')
      echo "${upper}_KUBECONFIG=$run_dir/$c/admin.kubeconfig"
      echo "${upper}_SERVER=$(cat "$run_dir/$c/server")"
    done
    if [ -n "$node_cluster" ]; then
      echo "NODE_CLUSTER=$node_cluster"
      echo "NODE_NAME=$NODE_NAME"
      echo "NODE_IP=$NODE_IP"
      echo "NODE_CONTAINERD_ADDRESS=$(node_dir)/containerd.sock"
    fi
  } >"$run_dir/env.tmp"
  mv "$run_dir/env.tmp" "$run_dir/env"
}

start_watchdog() { # owner pid
  BINDERY_WATCHDOG_OWNER=$1 setsid nohup bash -c '
    while kill -0 "$BINDERY_WATCHDOG_OWNER" 2>/dev/null; do sleep 0.5; done
    BINDERY_WATCHDOG_SELF=$$ exec "$0" down --run-dir "$1"
  ' "$here/cluster.sh" "$run_dir" >"$run_dir/watchdog.log" 2>&1 </dev/null 9>&- &
  echo $! >"$run_dir/watchdog.pid"
  echo "$1" >"$run_dir/watchdog.owner"
}

# A watchdog whose owner is gone is taking the clusters down (or is about
# to, within its 0.5 s poll): a run that starts right after the last one
# must wait for that, not reuse clusters that are going away.
wait_for_teardown() {
  local owner
  alive "$run_dir/watchdog.pid" || return 0
  owner=$(cat "$run_dir/watchdog.owner" 2>/dev/null) || owner=
  if [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null; then return 0; fi
  local waited=0
  while alive "$run_dir/watchdog.pid" && [ "$waited" -lt 120 ]; do
    sleep 1
    waited=$((waited + 1))
  done
}

up() {
  wait_for_teardown
  if [ "${clusters[*]}" = "${wanted[*]}" ] && [ "$node_cluster" = "$wanted_node" ] && status; then
    [ -n "$owner_pid" ] && ! alive "$run_dir/watchdog.pid" && start_watchdog "$owner_pid"
    cat "$run_dir/env"
    return 0
  fi
  down
  clusters=("${wanted[@]}")
  echo "${clusters[*]}" >"$run_dir/clusters"
  node_cluster=$wanted_node
  if [ -n "$node_cluster" ]; then
    [[ " ${clusters[*]} " == *" $node_cluster "* ]] || {
      echo "cluster.sh: --node $node_cluster names none of the clusters (${clusters[*]})" >&2
      exit 2
    }
    echo "$node_cluster" >"$run_dir/node-cluster"
  else
    rm -f "$run_dir/node-cluster"
  fi
  local bins
  bins=$("$here/build.sh" ${node_cluster:+--node})
  eval "$bins"
  local bindery=${BINDERY_BIN:-}
  if [ -z "$bindery" ]; then
    (cd "$repo" && cargo build --quiet --bin bindery)
    bindery=$repo/target/debug/bindery
  fi
  local c certs_args=()
  for c in "${clusters[@]}"; do certs_args+=(--cluster "$c"); done
  "$bindery" certs --out "$run_dir/pki" "${certs_args[@]}" >/dev/null
  # From here on, a failure must not leave half a cluster running.
  trap 'down' ERR
  if [ -n "$owner_pid" ]; then start_watchdog "$owner_pid"; fi
  if [ -n "$node_cluster" ]; then node_prepare; fi
  for c in "${clusters[@]}"; do start_cluster "$c"; done
  if [ -n "$node_cluster" ]; then node_up "$node_cluster"; fi
  trap - ERR
  write_env
  cat "$run_dir/env"
}

# One `up`/`down` at a time per run directory.
exec 9>"$run_dir/.lock"
flock 9
case $cmd in
  up) up ;;
  down) down ;;
  status) status ;;
  env) cat "$run_dir/env" ;;
  *) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
