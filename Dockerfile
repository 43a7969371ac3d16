# syntax=docker/dockerfile:1
# The hook's image. Build it with any OCI builder that supports cache mounts:
#   docker build -t mysql-hook .      (BuildKit)
#   podman build -t mysql-hook .      (or: buildah build --layers -t mysql-hook .)
# tests/image/build.sh builds exactly this file with buildah, and tests/image.rs
# runs the result (README, "The container image").

# Build stage. Nothing here names the workspace's crates, binaries or benches: the
# whole context is copied and cargo builds from it, so a new crate, bench or binary
# needs no change here. (The previous layout built placeholder sources first and
# drifted from the manifests: it lacked hooks/benches/ratio.rs, so `cargo fetch
# --locked` failed.) Dependencies are cached by cache mounts instead, which persist
# on the builder between builds: the crate registry (downloads) and the target
# directory (compiled dependencies), so after a source change only our crates
# compile again. A builder without that cache (a fresh CI machine) builds
# everything once. The target directory is a cache mount, not part of a layer, so
# the binary is copied out of it in the same step.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The agent (mysql-hook-agent) is built static for musl: it is copied into server
# images whose C library is not this one (Oracle Linux for mysql, Ubuntu for
# mariadb). The official rust image adds the target with rustup; a builder without
# rustup must have it already (tests/image/build.sh's stand-in copies the host's).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    { rustup target add x86_64-unknown-linux-musl 2>/dev/null \
      || test -d "$(rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-musl"; } \
 && cargo build --release --locked --bin mysql-hook \
 && cargo build --release --locked --target x86_64-unknown-linux-musl --bin mysql-hook-agent \
 && cp target/release/mysql-hook target/x86_64-unknown-linux-musl/release/mysql-hook-agent /usr/local/bin/

# Runtime: glibc, libgcc and CA certificates only, no shell, non-root (uid 65532).
FROM gcr.io/distroless/cc-debian12:nonroot
# The path is a contract: server and Job pods run `/usr/local/bin/mysql-hook
# install-scripts` from this image (hooks::scripts::INSTALL_COMMAND).
COPY --from=build /usr/local/bin/mysql-hook /usr/local/bin/mysql-hook-agent /usr/local/bin/
USER 65532:65532
EXPOSE 8080
# Off loopback the hook needs MYSQL_HOOK_AUTH_TOKEN_FILE (the Deployment sets it).
ENV MYSQL_HOOK_LISTEN=0.0.0.0:8080
ENTRYPOINT ["/usr/local/bin/mysql-hook"]
CMD ["serve"]
