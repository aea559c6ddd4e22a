# shellcheck shell=bash
# The test node: one cluster of a run (`cluster.sh up --node NAME`) gets a
# node, so that its pods run for real. Sourced by cluster.sh, whose helpers
# (alive, start_process, wait_for, stop_pidfiles, log_tail, kubectl_bin,
# free_ports) it uses; everything lives in <run-dir>/node/.
#
# What runs: Debian's containerd (runc, CNI plugins from
# containernetworking-plugins: bridge, host-local, loopback, portmap;
# installed by hack/node-deps), and kube-scheduler, kubelet and kube-proxy
# built from the pinned Kubernetes module (build.sh --node). The pause image
# is the project's own program (gobuild/pause), packed by hack/oci-image.py.
#
# Network: the pods' bridge bindery0 holds the node's address 10.88.0.1 and
# the pods' subnet 10.88.0.0/24; the clusters of a run with a node listen
# on every address (the pods reach their kube-apiservers at 10.88.0.1), and
# the node cluster advertises 10.88.0.1, so its `kubernetes` Service
# (10.0.0.1) leads there. No traffic leaves the machine: the Service range
# is routed to the bridge, pods have no masquerade, and the host forwards
# nothing: node_prepare gives the bridge its address itself, so the bridge
# plugin runs with isGateway false and leaves ip_forward alone (pods reach
# the node and, through kube-proxy, Services that lead to it; a Service
# leading from a pod to another pod would need forwarding, which nothing
# here uses).
#
# One node per machine: kube-proxy's iptables chains and the bridge are the
# machine's. /run/bindery-node.owner names the run dir whose node runs; a
# second run dir asking for a node while that one lives fails and says so.

NODE_IP=10.88.0.1
NODE_BRIDGE=bindery0
NODE_POD_SUBNET=10.88.0.0/24
# cluster.sh's --service-cluster-ip-range.
NODE_SERVICE_RANGE=10.0.0.0/24
NODE_NAME=bindery-node
NODE_OWNER_FILE=/run/bindery-node.owner

node_dir() { echo "$run_dir/node"; }

# Before the clusters start: the node's address must exist for the
# kube-apiservers to be reached at it.
node_prepare() {
  local owner
  if [ -f "$NODE_OWNER_FILE" ]; then
    owner=$(cat "$NODE_OWNER_FILE")
    if [ "$owner" != "$run_dir" ] && [ -f "$owner/node/kubelet.pid" ] &&
      [ -r "/proc/$(cat "$owner/node/kubelet.pid")/cmdline" ] &&
      tr '\0' ' ' <"/proc/$(cat "$owner/node/kubelet.pid")/cmdline" | grep -qF "$owner"; then
      echo "cluster.sh: a test node already runs on this machine, for $owner; stop it first (cluster.sh down --run-dir $owner)" >&2
      return 1
    fi
  fi
  "$repo/hack/node-deps" >&2
  echo "$run_dir" >"$NODE_OWNER_FILE"
  node_cleanup_machine
  ip link add "$NODE_BRIDGE" type bridge
  ip addr add "$NODE_IP/24" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  # The clusters' Service range leads to the bridge: kube-proxy rewrites
  # what it knows to pods or the node; anything it does not know stays on
  # the bridge instead of taking the machine's default route.
  ip route add "$NODE_SERVICE_RANGE" dev "$NODE_BRIDGE"
  # Service traffic between pods on the same bridge must pass iptables.
  if [ -w /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
    echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
  fi
  # containerd's CRI plugin and the kubelet each take inotify instances; on
  # a machine running many clusters (the e2e tests) the default 128 runs out
  # and the CRI plugin fails to load ("too many open files"), as kind's known
  # issues describe. Raised, never lowered.
  local limit file want
  for limit in max_user_instances:1024 max_user_watches:524288; do
    file=/proc/sys/fs/inotify/${limit%%:*}
    want=${limit##*:}
    if [ -w "$file" ] && [ "$(cat "$file")" -lt "$want" ]; then
      echo "$want" >"$file"
    fi
  done
}

# What a node leaves on the machine outside its run dir: kube-proxy's and the
# kubelet's iptables chains, and the bridge.
node_cleanup_machine() {
  local bin=${KUBE_NODE_BIN_DIR:-$(cat "$(node_dir)/bin-dir" 2>/dev/null || true)}
  if [ -n "$bin" ] && [ -x "$bin/kube-proxy" ]; then
    "$bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
  fi
  # The kubelet's own chains: its canaries, the iptables hint, and the
  # firewall chain (dropping outside traffic to 127.0.0.0/8) with its jumps.
  local tables table
  for tables in iptables ip6tables; do
    command -v "$tables" >/dev/null 2>&1 || continue
    while "$tables" -t filter -D INPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
    while "$tables" -t filter -D OUTPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
    "$tables" -t filter -F KUBE-FIREWALL 2>/dev/null || true
    "$tables" -t filter -X KUBE-FIREWALL 2>/dev/null || true
    for table in filter nat mangle; do
      "$tables" -t "$table" -X KUBE-KUBELET-CANARY 2>/dev/null || true
    done
    "$tables" -t mangle -X KUBE-IPTABLES-HINT 2>/dev/null || true
  done
  ip link del "$NODE_BRIDGE" 2>/dev/null || true
}

node_containerd_config() { # node-dir pause-image
  local dir=$1 pause=$2
  mkdir -p "$dir/cni" "$dir/containerd"
  cat >"$dir/cni/10-bindery.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "bindery",
  "plugins": [
    {
      "type": "bridge", "bridge": "$NODE_BRIDGE", "isGateway": false,
      "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$dir/cni-ipam",
        "ranges": [[{"subnet": "$NODE_POD_SUBNET", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0", "gw": "$NODE_IP"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat >"$dir/containerd.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$dir/containerd.sock"
[ttrpc]
  address = "$dir/containerd-ttrpc.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause"
  netns_mounts_under_state_dir = true
  # This machine's root lacks CAP_SYS_RESOURCE, so no process may lower its
  # oom_score_adj below 0 (the pause container's -998 would fail): keep
  # every container's at or above containerd's own.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        # runc's state in the run dir, not the machine's /run/containerd.
        Root = "$dir/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni"
EOF
}

node_kubelet_config() { # node-dir kubelet-port
  local dir=$1 port=$2
  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $port
readOnlyPort: 0
healthzPort: 0
# The kube-apiserver reaches the kubelet (logs, port-forward) with no
# client certificate; the kubelet listens on the node's bridge address only.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$dir/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /bindery-node
# This machine mounts cgroup v1 controllers (with a cgroup2 hierarchy
# beside them), and has no swap limit to enforce.
failCgroupV1: false
failSwapOn: false
podLogsDir: $dir/pod-logs
staticPodPath: ""
resolvConf: /etc/resolv.conf
maxPods: 30
serializeImagePulls: false
# No lower than 0: see restrict_oom_score_adj in containerd.toml.
oomScoreAdj: 0
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
EOF
}

node_kube_proxy_config() { # node-dir kubeconfig
  cat >"$1/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $2}
hostnameOverride: $NODE_NAME
clusterCIDR: $NODE_POD_SUBNET
bindAddress: $NODE_IP
healthzBindAddress: ""
metricsBindAddress: ""
oomScoreAdj: 0
# Leave the machine's conntrack table size alone.
conntrack: {maxPerCore: 0}
iptables: {localhostNodePorts: false}
nodePortAddresses: ["$NODE_IP/32"]
EOF
}

# Ready, and schedulable: the node lifecycle controller has lifted the
# kubelet's not-ready taint.
node_ready() { # kubeconfig
  local ready
  ready=$("$(kubectl_bin)" --kubeconfig "$1" get node "$NODE_NAME" \
    -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.spec.taints}' 2>/dev/null)
  [ "$ready" = "True " ]
}

# kube-proxy has written the rules of the node cluster's `kubernetes` Service.
node_proxy_ready() { iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q 'default/kubernetes:https'; }

node_up() { # cluster
  local c=$1 dir
  dir=$(node_dir)
  local kubeconfig=$run_dir/$c/admin.kubeconfig
  mkdir -p "$dir"
  echo "$KUBE_NODE_BIN_DIR" >"$dir/bin-dir"
  local pause_tag pause_image
  pause_tag=$(basename "$PAUSE_BIN_DIR" | sed 's/^pause-//; s/-linux-.*//')
  pause_image=bindery.local/pause:$pause_tag
  node_containerd_config "$dir" "$pause_image"
  start_process containerd "$dir/containerd.log" "$dir/containerd.pid" \
    containerd --config "$dir/containerd.toml"
  wait_for "$c containerd" "$dir/containerd.log" "$dir/containerd.pid" 30 \
    ctr --address "$dir/containerd.sock" version
  python3 "$repo/hack/oci-image.py" --out "$dir/pause.oci.tar" --name "$pause_image" \
    --entrypoint /pause --user 65535:65535 --file "$PAUSE_BIN_DIR/pause:/pause:0755" >/dev/null
  ctr --address "$dir/containerd.sock" -n k8s.io images import "$dir/pause.oci.tar" >/dev/null

  start_process kube-scheduler "$dir/kube-scheduler.log" "$dir/kube-scheduler.pid" \
    "$KUBE_NODE_BIN_DIR/kube-scheduler" --kubeconfig "$kubeconfig" \
    --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 0

  # The kubelet's cgroup root exists in every cgroup v1 hierarchy; a new
  # cpuset starts empty, so it takes its parent's CPUs and memory nodes.
  local hierarchy
  for hierarchy in /sys/fs/cgroup/*/; do
    [ -f "$hierarchy/cgroup.procs" ] || continue
    mkdir -p "$hierarchy/bindery-node"
  done
  if [ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus >/sys/fs/cgroup/cpuset/bindery-node/cpuset.cpus
    cat /sys/fs/cgroup/cpuset/cpuset.mems >/sys/fs/cgroup/cpuset/bindery-node/cpuset.mems
  fi
  local kubelet_port
  read -r kubelet_port < <(free_ports 1)
  node_kubelet_config "$dir" "$kubelet_port"
  start_process kubelet "$dir/kubelet.log" "$dir/kubelet.pid" \
    "$KUBE_NODE_BIN_DIR/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$kubeconfig" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
    --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki"
  node_kube_proxy_config "$dir" "$kubeconfig"
  start_process kube-proxy "$dir/kube-proxy.log" "$dir/kube-proxy.pid" \
    "$KUBE_NODE_BIN_DIR/kube-proxy" --config "$dir/kube-proxy.yaml"
  wait_for "$c kubelet (node $NODE_NAME Ready)" "$dir/kubelet.log" "$dir/kubelet.pid" 120 \
    node_ready "$kubeconfig"
  wait_for "$c kube-proxy" "$dir/kube-proxy.log" "$dir/kube-proxy.pid" 60 node_proxy_ready
  if ! alive "$dir/kube-scheduler.pid"; then
    echo "cluster.sh: $c kube-scheduler exited during start-up" >&2
    log_tail "$dir/kube-scheduler.log"
    return 1
  fi
}

node_status() {
  local dir component
  dir=$(node_dir)
  for component in containerd kube-scheduler kubelet kube-proxy; do
    alive "$dir/$component.pid" || return 1
  done
}

# Stops the node and removes what it made: every container (killed through
# the node's cgroups, which holds even when containerd is gone), mounts
# below the node dir, kube-proxy's rules, the bridge.
node_down() {
  local dir
  dir=$(node_dir)
  [ -d "$dir" ] || return 0
  # The node's cgroups and the bridge are the machine's: another run's node
  # owns them while it runs.
  local owner
  owner=$(cat "$NODE_OWNER_FILE" 2>/dev/null || true)
  if [ -n "$owner" ] && [ "$owner" != "$run_dir" ]; then return 0; fi
  stop_pidfiles "$dir/kubelet.pid" "$dir/kube-proxy.pid" "$dir/kube-scheduler.pid"
  local cgroup pid
  for _ in 1 2 3; do
    for cgroup in /sys/fs/cgroup/pids/bindery-node /sys/fs/cgroup/memory/bindery-node; do
      [ -d "$cgroup" ] || continue
      while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done \
        < <(find "$cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null)
    done
    sleep 0.2
  done
  stop_pidfiles "$dir/containerd.pid"
  # The shims outlive containerd; theirs name the node dir.
  local shims
  shims=$(pgrep -f "containerd-shim.*$dir" || true)
  [ -z "$shims" ] || kill -KILL $shims 2>/dev/null || true
  local mount
  while read -r mount; do umount -l "$mount" 2>/dev/null || true; done \
    < <(findmnt -rn -o TARGET | grep -F "$dir/" | sort -r)
  for cgroup in /sys/fs/cgroup/*/bindery-node; do
    [ -d "$cgroup" ] && find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  node_cleanup_machine
  rm -f "$NODE_OWNER_FILE"
}
