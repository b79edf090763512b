# zeus-nb: the notebooks in JupyterLab, on NVIDIA GPUs or on the simulated GPU.
#
#   docker build -t zeus-nb .
#   docker run --rm -it --gpus all -p 8888:8888 -e JUPYTER_TOKEN=change-me zeus-nb
#
# For laptops without an NVIDIA GPU: `--build-arg VARIANT=cpu` builds on plain Ubuntu with PyTorch's
# CPU wheels (no CUDA libraries). /workspace/notebooks holds the student edition (exercises blank);
# `--build-arg EDITION=instructor` keeps the solutions, and /workspace/course-source the notebooks
# with their solution markers, which `zeus-nb course build /workspace/course-source` needs (the
# student image holds no solutions, so a teacher builds the course from the instructor image).
#
# As a Dask worker for `zeus-nb sweep --scheduler tcp://HOST:8786` (one container per GPU; see
# docs/cluster.md):
#
#   docker run --rm --gpus '"device=0"' --network host zeus-nb \
#       dask worker tcp://HOST:8786 --nthreads 1 --resources GPU=1
#
# Measuring energy needs only `--gpus all`. Changing power limits (the optimizers) also needs
# `--cap-add SYS_ADMIN --user root` (and a volume for the power-limit record); see docs/gpu.md.
ARG VARIANT=gpu
FROM nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04 AS base-gpu
FROM ubuntu:24.04 AS base-cpu
# hadolint ignore=DL3006
FROM base-${VARIANT}
ARG VARIANT
ARG EDITION=student

# PyTorch wheels built for the base image's CUDA version; pip falls back to the default wheels
# (which bring their own CUDA libraries) when this index lacks the required torch release.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126
ARG USER_NAME=zeus
ARG USER_UID=1000

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        python3 python3-venv tini ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# A non-root user owns the virtual environment (so `pip install` works in a notebook), the
# working folder, and the source folder it installs from and removes afterwards.
# Ubuntu 24.04 images ship a user "ubuntu" with UID 1000; it would clash with ours.
RUN if id -u ubuntu >/dev/null 2>&1; then userdel --remove ubuntu; fi \
    && useradd --create-home --uid "${USER_UID}" --shell /bin/bash "${USER_NAME}" \
    && mkdir -p /opt/zeus-nb /workspace /data/imagenet /var/lib/zeus-nb/power_limits \
        /tmp/zeus-nb-src \
    && chown -R "${USER_NAME}:${USER_NAME}" /opt/zeus-nb /workspace /var/lib/zeus-nb \
        /tmp/zeus-nb-src

# The virtual environment lives outside /workspace: bind-mounting a checkout over the working
# folder must not hide it. The original power limits that `zeus-nb restore` needs after a crash
# are recorded in /var/lib/zeus-nb: mount a volume there so the record outlives the container.
ENV VIRTUAL_ENV=/opt/zeus-nb \
    PATH=/opt/zeus-nb/bin:${PATH} \
    ZEUS_NB_DATA_DIR=/data/imagenet \
    ZEUS_NB_NOTEBOOKS=/workspace/notebooks \
    ZEUS_NB_STATE_DIR=/var/lib/zeus-nb/power_limits

USER ${USER_NAME}
COPY --chown=${USER_NAME}:${USER_NAME} . /tmp/zeus-nb-src
# The CPU variant installs PyTorch's CPU wheels first, so the package install finds torch in place.
RUN if [ "${VARIANT}" = cpu ]; then \
        python3 -m venv /opt/zeus-nb \
        && /opt/zeus-nb/bin/pip install --no-cache-dir torch torchvision \
            --index-url https://download.pytorch.org/whl/cpu; \
    fi \
    && /tmp/zeus-nb-src/docker/install.sh /opt/zeus-nb --extra-index-url "${TORCH_INDEX_URL}" \
    && mkdir -p /workspace/notebooks \
    && cp /tmp/zeus-nb-src/notebooks/*.ipynb /workspace/notebooks/ \
    && if [ "${EDITION}" = instructor ]; then \
        mkdir -p /workspace/course-source \
        && cp /tmp/zeus-nb-src/notebooks/*.ipynb /workspace/course-source/; \
    fi \
    && python -c "import sys; from zeus_nb.course import write_edition; \
write_edition('/workspace/notebooks', sys.argv[1] == 'instructor', ['/workspace/notebooks'])" \
        "${EDITION}" \
    && cp -r /tmp/zeus-nb-src/data_scripts /workspace/data_scripts \
    && rm -rf /tmp/zeus-nb-src

WORKDIR /workspace
EXPOSE 8888

# JupyterLab reads its token from JUPYTER_TOKEN (`-e JUPYTER_TOKEN=...`); without it, it makes a
# random one and prints the URL in the container's log. --allow-root only matters with
# `--user root`, which changing power limits needs.
ENTRYPOINT ["tini", "--"]
CMD ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", "--allow-root", "--ServerApp.root_dir=/workspace"]
