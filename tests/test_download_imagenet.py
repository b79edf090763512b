"""download_imagenet.sh against a local HTTP server that serves synthetic archives."""

from __future__ import annotations

import hashlib
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "data_scripts"
DOWNLOAD = SCRIPTS / "download_imagenet.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Handler(http.server.BaseHTTPRequestHandler):
    """GET with single ``bytes=N-`` ranges; can drop the connection part-way, once per file."""

    root: Path
    cut_after: dict[str, int]
    log: list[tuple[str, str | None]]

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        name = self.path.lstrip("/")
        self.log.append((name, self.headers.get("Range")))
        path = self.root / name
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        start = 0
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-", rng)
            start = int(m.group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        body = data[start:]
        cut = self.cut_after.pop(name, None)
        if cut is not None:  # simulate a dropped connection: promise everything, send part
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    manifest = _load("make_synthetic_imagenet").make(out, classes=3, train_per_class=4)
    return out / "archives", manifest


@pytest.fixture
def server(synthetic):
    archives, _ = synthetic
    handler = type(
        "H", (_Handler,), {"root": archives, "cut_after": {}, "log": []}
    )  # fresh state per test
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.handler = handler
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _env(synthetic, **extra) -> dict[str, str]:
    _, manifest = synthetic
    env = dict(os.environ)
    for key, info in manifest["archives"].items():
        env[f"ZEUS_NB_IMAGENET_{key.upper()}_MD5"] = info["md5"]
        env[f"ZEUS_NB_IMAGENET_{key.upper()}_SIZE"] = str(info["size"])
    env["ZEUS_NB_DOWNLOAD_RETRY_DELAY"] = "0"
    env.update(extra)
    return env


def _run(args, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(DOWNLOAD), *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_download_resumes_after_cut_connection(synthetic, server, tmp_path):
    _, manifest = synthetic
    server.handler.cut_after["ILSVRC2012_img_val.tar"] = 10_000
    dest = tmp_path / "dl"
    r = _run([server.url, dest], _env(synthetic))
    assert r.returncode == 0, r.stderr
    for info in manifest["archives"].values():
        assert _md5(dest / info["file"]) == info["md5"]
        assert not (dest / (info["file"] + ".part")).exists()
    # the retry asked only for the missing bytes
    val_requests = [rng for name, rng in server.handler.log if name == "ILSVRC2012_img_val.tar"]
    assert val_requests == [None, "bytes=10000-"]
    assert "extract_imagenet.py" in r.stdout

    # a second run finds everything verified and downloads nothing
    before = len(server.handler.log)
    r2 = _run([server.url, dest], _env(synthetic))
    assert r2.returncode == 0, r2.stderr
    assert len(server.handler.log) == before
    assert r2.stdout.count("verified before") == 3


@pytest.mark.parametrize("tool", ["curl", "wget"])
def test_rerun_resumes_a_partial_file(synthetic, server, tmp_path, tool):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} not installed")
    _, manifest = synthetic
    info = manifest["archives"]["train"]
    server.handler.cut_after[info["file"]] = 5_000
    dest = tmp_path / "dl"
    env = _env(synthetic, ZEUS_NB_DOWNLOAD_ATTEMPTS="1", ZEUS_NB_DOWNLOADER=tool)
    r = _run(["--only", "train", server.url, dest], env)
    assert r.returncode == 1
    assert "re-run this command to resume" in r.stderr
    part = dest / (info["file"] + ".part")
    assert part.stat().st_size == 5_000
    r = _run(["--only", "train", server.url, dest], env)
    assert r.returncode == 0, r.stderr
    assert _md5(dest / info["file"]) == info["md5"]
    assert server.handler.log[-1] == (info["file"], "bytes=5000-")


def test_checksum_mismatch_is_detected(synthetic, server, tmp_path):
    archives, manifest = synthetic
    info = manifest["archives"]["devkit"]
    bad_root = tmp_path / "served"
    bad_root.mkdir()
    data = bytearray((archives / info["file"]).read_bytes())
    data[100] ^= 0xFF  # same size, different content
    (bad_root / info["file"]).write_bytes(bytes(data))
    server.handler.root = bad_root
    dest = tmp_path / "dl"
    r = _run(["--only", "devkit", server.url, dest], _env(synthetic))
    assert r.returncode == 1
    assert f"MD5 is {hashlib.md5(data).hexdigest()}, expected {info['md5']}" in r.stderr
    assert not (dest / info["file"]).exists()
    assert (dest / (info["file"] + ".corrupt")).exists()


def test_verify_reports_missing_and_wrong_files(synthetic, tmp_path):
    archives, manifest = synthetic
    dest = tmp_path / "dl"
    dest.mkdir()
    r = _run(["--verify", dest], _env(synthetic))
    assert r.returncode == 1
    assert "ILSVRC2012_img_train.tar is missing" in r.stderr
    for info in manifest["archives"].values():
        shutil.copy(archives / info["file"], dest)
    assert _run(["--verify", dest], _env(synthetic)).returncode == 0
    (dest / manifest["archives"]["val"]["file"]).write_bytes(b"x" * 10)
    (dest / (manifest["archives"]["val"]["file"] + ".verified")).unlink()
    r = _run(["--verify", dest], _env(synthetic))
    assert r.returncode == 1
    assert "size is 10 bytes" in r.stderr


def test_oversized_partial_file_is_rejected(synthetic, server, tmp_path):
    _, manifest = synthetic
    info = manifest["archives"]["val"]
    dest = tmp_path / "dl"
    dest.mkdir()
    (dest / (info["file"] + ".part")).write_bytes(b"\0" * (info["size"] + 1))
    r = _run(["--only", "val", server.url, dest], _env(synthetic))
    assert r.returncode == 1
    assert "larger than the official" in r.stderr
    assert server.handler.log == []


def test_usage_errors(tmp_path):
    r = _run([], dict(os.environ))
    assert r.returncode == 1 and "base URL" in r.stderr
    r = _run(["--only", "test", "http://x/", tmp_path], dict(os.environ))
    assert r.returncode == 1 and "unknown archive 'test'" in r.stderr


def test_default_checksums_are_the_official_ones():
    # read torchvision's table of the published checksums without importing torch (slow)
    spec = importlib.util.find_spec("torchvision")
    source = (Path(spec.origin).parent / "datasets" / "imagenet.py").read_text()
    meta = re.findall(r'"(\w+)": \("(ILSVRC2012_\w+\.tar(?:\.gz)?)", "([0-9a-f]{32})"\)', source)
    assert {key for key, _, _ in meta} == {"train", "val", "devkit"}
    text = DOWNLOAD.read_text()
    for key, name, md5 in meta:
        assert re.search(rf"\[{key}\]=\$\{{ZEUS_NB_IMAGENET_{key.upper()}_MD5-{md5}\}}", text), name


def test_complete_part_file_of_unknown_size_is_not_refetched(synthetic, server, tmp_path):
    """Without an expected size, a finished .part is recognised by its MD5 (no 416 from curl)."""
    archives, manifest = synthetic
    info = manifest["archives"]["devkit"]
    dest = tmp_path / "dl"
    dest.mkdir()
    shutil.copy(archives / info["file"], dest / (info["file"] + ".part"))
    r = _run(
        ["--only", "devkit", server.url, dest], _env(synthetic, ZEUS_NB_IMAGENET_DEVKIT_SIZE="")
    )
    assert r.returncode == 0, r.stderr
    assert server.handler.log == []
    assert _md5(dest / info["file"]) == info["md5"]
