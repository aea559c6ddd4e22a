#!/usr/bin/env python3
"""Writes a one-layer OCI image archive (an OCI image layout in a tar, as
`ctr images import` and `skopeo copy oci-archive:` read it) from files on
this machine, without a container engine. hack/image packs bindery with it,
conformance/cluster/node.sh the test node's pause image.

The archive is reproducible: every entry has mtime 0 and owner 0:0 (so the
files are root's and read-only to the image's non-root user), entries are
sorted, and the gzip header carries no time.

  oci-image.py --out IMAGE.tar --name REPO:TAG --entrypoint PATH [--user UID:GID]
               [--file SRC:DEST[:MODE]]... [--dir DEST[:MODE]]... [--text DEST=CONTENT]...
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import tarfile


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def add(tar, dest, data=None, mode=0o755, kind=tarfile.REGTYPE):
    info = tarfile.TarInfo(dest.lstrip("/"))
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = mode
    info.type = kind
    if data is not None:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        tar.addfile(info)


def layer(files, dirs, texts):
    """The layer as an uncompressed tar: directories first, then files."""
    entries = {}
    for spec in files:
        parts = spec.split(":")
        src, dest = parts[0], parts[1]
        mode = int(parts[2], 8) if len(parts) > 2 else 0o755
        with open(os.path.realpath(src), "rb") as f:
            entries[dest] = (f.read(), mode)
    for spec in texts:
        dest, content = spec.split("=", 1)
        entries[dest] = (content.encode(), 0o644)
    directories = {}
    for spec in dirs:
        dest, _, mode = spec.partition(":")
        directories[dest] = int(mode, 8) if mode else 0o755
    for dest in entries:
        parent = os.path.dirname(dest)
        while parent not in ("", "/"):
            directories.setdefault(parent, 0o755)
            parent = os.path.dirname(parent)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dest in sorted(directories):
            add(tar, dest, mode=directories[dest], kind=tarfile.DIRTYPE)
        for dest in sorted(entries):
            data, mode = entries[dest]
            add(tar, dest, data, mode)
    return out.getvalue()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--name", required=True, help="full reference, e.g. bindery.local/bindery:dev")
    p.add_argument("--entrypoint", required=True)
    p.add_argument("--user", default="65532:65532")
    p.add_argument("--file", action="append", default=[])
    p.add_argument("--dir", action="append", default=[])
    p.add_argument("--text", action="append", default=[])
    p.add_argument("--label", action="append", default=[])
    a = p.parse_args()

    raw = layer(a.file, a.dir, a.text)
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, compresslevel=6) as f:
        f.write(raw)
    blob = gz.getvalue()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": a.user,
            "Entrypoint": [a.entrypoint],
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
            "WorkingDir": "/",
            "Labels": dict(label.split("=", 1) for label in a.label),
        },
        "rootfs": {"type": "layers", "diff_ids": [sha256(raw)]},
        "history": [{"created_by": "hack/oci-image.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": sha256(config_bytes),
            "size": len(config_bytes),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": sha256(blob),
                "size": len(blob),
            }
        ],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    tag = a.name.rsplit(":", 1)[1] if ":" in a.name.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": sha256(manifest_bytes),
                "size": len(manifest_bytes),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": a.name,
                    "org.opencontainers.image.ref.name": tag,
                },
            }
        ],
    }
    tmp = a.out + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode(), 0o644)
        add(tar, "index.json", json.dumps(index, sort_keys=True).encode(), 0o644)
        add(tar, "blobs", mode=0o755, kind=tarfile.DIRTYPE)
        add(tar, "blobs/sha256", mode=0o755, kind=tarfile.DIRTYPE)
        for data in sorted((config_bytes, manifest_bytes, blob), key=sha256):
            add(tar, "blobs/sha256/" + sha256(data)[7:], data, 0o644)
    os.replace(tmp, a.out)
    print(f"{a.out}: {a.name} {sha256(manifest_bytes)} ({len(blob)} bytes compressed)")


if __name__ == "__main__":
    main()
