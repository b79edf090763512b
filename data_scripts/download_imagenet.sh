#!/usr/bin/env bash
# Download the ILSVRC2012 (ImageNet-1k) archives, resumably, and verify them.
#
# The archives are only available to users who accepted the ImageNet terms of access, so the
# download base URL comes from you (the folder that holds the three archives).
#
#   data_scripts/download_imagenet.sh BASE_URL [DEST]          download (or resume) and verify
#   data_scripts/download_imagenet.sh --verify [DEST]          verify files already in DEST
#   options: --only train,val,devkit   fetch a subset (e.g. --only val,devkit to evaluate only)
#
# A file is fetched into DEST/NAME.part with `curl -C -` (or `wget -c`), so re-running the script,
# or a retry after a dropped connection, continues where the transfer stopped. A complete file is
# checked against the official size and MD5 before it is renamed to DEST/NAME.
#
# Environment (mainly for tests that serve small synthetic archives):
#   ZEUS_NB_IMAGENET_{TRAIN,VAL,DEVKIT}_MD5    expected MD5 (default: the official checksum)
#   ZEUS_NB_IMAGENET_{TRAIN,VAL,DEVKIT}_SIZE   expected size in bytes ("" = do not check size)
#   ZEUS_NB_DOWNLOAD_ATTEMPTS                  transfer attempts per file (default 5)
#   ZEUS_NB_DOWNLOAD_RETRY_DELAY               seconds between attempts (default 2)
#   ZEUS_NB_DOWNLOADER                         curl or wget (default: curl if installed)
set -euo pipefail

usage() { # the header comment, up to the first line of code
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit "${1:-2}"
}

die() {
    echo "error: $*" >&2
    exit 1
}

# name -> official file, MD5 and size. MD5s are the published ILSVRC2012 checksums; the devkit's
# size is not pinned (its MD5 alone identifies it).
declare -A FILE=(
    [train]=ILSVRC2012_img_train.tar
    [val]=ILSVRC2012_img_val.tar
    [devkit]=ILSVRC2012_devkit_t12.tar.gz
)
declare -A MD5=(
    [train]=${ZEUS_NB_IMAGENET_TRAIN_MD5-1d675b47d978889d74fa0da5fadfb00e}
    [val]=${ZEUS_NB_IMAGENET_VAL_MD5-29b22e2961454d5413ddabcf34fc5622}
    [devkit]=${ZEUS_NB_IMAGENET_DEVKIT_MD5-fa75699e90414af021442c21a62c3abf}
)
declare -A SIZE=(
    [train]=${ZEUS_NB_IMAGENET_TRAIN_SIZE-147897477120}
    [val]=${ZEUS_NB_IMAGENET_VAL_SIZE-6744924160}
    [devkit]=${ZEUS_NB_IMAGENET_DEVKIT_SIZE-}
)
ATTEMPTS=${ZEUS_NB_DOWNLOAD_ATTEMPTS:-5}

verify_only=0
only="devkit,val,train"
positional=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h | --help) usage 0 ;;
        --verify) verify_only=1 ;;
        --only)
            [[ $# -ge 2 ]] || die "--only needs a list such as train,val,devkit"
            only="$2"
            shift
            ;;
        --only=*) only="${1#--only=}" ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) positional+=("$1") ;;
    esac
    shift
done

names=()
IFS=',' read -r -a requested <<<"$only"
for n in "${requested[@]}"; do
    [[ -n "${FILE[$n]+x}" ]] || die "--only: unknown archive '$n'; use train, val and/or devkit"
    names+=("$n")
done

if [[ $verify_only -eq 1 ]]; then
    [[ ${#positional[@]} -le 1 ]] || die "--verify takes at most one folder"
    base_url=""
    dest="${positional[0]:-.}"
else
    [[ ${#positional[@]} -ge 1 && ${#positional[@]} -le 2 ]] ||
        die "give the download base URL (the folder holding the ILSVRC2012 archives) and an optional destination; see --help"
    base_url="${positional[0]%/}"
    dest="${positional[1]:-.}"
fi

file_size() { stat -c %s "$1" 2>/dev/null || stat -f %z "$1"; }

file_md5() {
    if command -v md5sum >/dev/null; then
        md5sum "$1" | cut -d' ' -f1
    elif command -v md5 >/dev/null; then
        md5 -q "$1"
    else
        python3 -c 'import hashlib,sys
h=hashlib.md5()
with open(sys.argv[1],"rb") as f:
    for b in iter(lambda: f.read(1<<20), b""): h.update(b)
print(h.hexdigest())' "$1"
    fi
}

downloader=${ZEUS_NB_DOWNLOADER:-}
if [[ -z "$downloader" ]]; then
    if command -v curl >/dev/null; then downloader=curl; elif command -v wget >/dev/null; then downloader=wget; fi
fi

fetch() { # url out: one resumable transfer attempt
    case "$downloader" in
        curl) curl --fail --location --silent --show-error --continue-at - --output "$2" "$1" ;;
        wget) wget --quiet --continue --tries=1 --output-document="$2" "$1" ;;
        *) die "neither curl nor wget is installed; install one of them" ;;
    esac
}

# check NAME PATH: size then MD5; prints the reason on failure
check() {
    local n="$1" path="$2" size got
    size=$(file_size "$path")
    if [[ -n "${SIZE[$n]}" && "$size" != "${SIZE[$n]}" ]]; then
        echo "size is $size bytes, expected ${SIZE[$n]}"
        return 1
    fi
    echo "  computing the MD5 of $(basename "$path") ($size bytes)..." >&2
    got=$(file_md5 "$path")
    if [[ "$got" != "${MD5[$n]}" ]]; then
        echo "MD5 is $got, expected ${MD5[$n]}"
        return 1
    fi
}

mkdir -p "$dest"
status=0
for n in "${names[@]}"; do
    f="${FILE[$n]}"
    out="$dest/$f"
    part="$out.part"
    stamp="$out.verified"
    if [[ -f "$out" ]]; then
        # A stamp written after a successful check saves re-hashing 140 GB on every run.
        if [[ -f "$stamp" && "$(cat "$stamp")" == "${MD5[$n]} $(file_size "$out")" ]]; then
            echo "ok: $f (verified before)"
            continue
        fi
        if reason=$(check "$n" "$out"); then
            echo "${MD5[$n]} $(file_size "$out")" >"$stamp"
            echo "ok: $f"
            continue
        fi
        rm -f "$stamp"
        if [[ $verify_only -eq 1 ]]; then
            echo "error: $out is not the official $f: $reason; delete it and run the download again" >&2
            status=1
            continue
        fi
        echo "$out is incomplete or wrong ($reason); resuming into $part" >&2
        mv "$out" "$part"
    elif [[ $verify_only -eq 1 ]]; then
        echo "error: $out is missing; download it with: $0 BASE_URL $dest" >&2
        status=1
        continue
    fi

    if [[ -n "${SIZE[$n]}" && -f "$part" ]] && (($(file_size "$part") > ${SIZE[$n]})); then
        die "$part is larger than the official $f (${SIZE[$n]} bytes): it is not that file; delete it and re-run"
    fi
    attempt=1
    while :; do
        if [[ -n "${SIZE[$n]}" && -f "$part" && "$(file_size "$part")" == "${SIZE[$n]}" ]]; then
            break # complete already: asking the server for more would be answered with 416
        fi
        if [[ -z "${SIZE[$n]}" && -f "$part" ]] && check "$n" "$part" >/dev/null 2>&1; then
            break # no size to compare with, but the checksum says it is complete
        fi
        echo "downloading $f (attempt $attempt of $ATTEMPTS)..."
        if fetch "$base_url/$f" "$part"; then
            break
        fi
        if ((attempt >= ATTEMPTS)); then
            die "could not download $base_url/$f after $ATTEMPTS attempts; re-run this command to resume from $(file_size "$part" 2>/dev/null || echo 0) bytes"
        fi
        attempt=$((attempt + 1))
        sleep "${ZEUS_NB_DOWNLOAD_RETRY_DELAY:-2}"
    done
    if ! reason=$(check "$n" "$part"); then
        mv "$part" "$out.corrupt"
        die "$f from $base_url failed verification: $reason. Moved it to $out.corrupt; check the base URL, delete that file and re-run"
    fi
    mv "$part" "$out"
    echo "${MD5[$n]} $(file_size "$out")" >"$stamp"
    echo "ok: $f"
done

if [[ $status -ne 0 ]]; then
    exit $status
fi
here=$(cd "$(dirname "$0")" && pwd)
echo
echo "All archives verified in $dest. Next step, extraction into train/ and val/ class folders:"
echo "  python $here/extract_imagenet.py $dest --out DATA_DIR"
