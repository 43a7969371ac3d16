# syntax=docker/dockerfile:1
# Build: docker build -t mysql-hook .
FROM rust:1.95-bookworm AS build
WORKDIR /src
# Dependencies first, so a source change does not refetch and rebuild them.
COPY Cargo.toml Cargo.lock ./
COPY hooks/Cargo.toml hooks/Cargo.toml
# hooks/Cargo.toml names its benches, so they need placeholders too.
RUN mkdir -p src hooks/src hooks/benches \
 && echo 'fn main() {}' > src/main.rs && touch src/lib.rs hooks/src/lib.rs \
 && for b in core growth; do echo 'fn main() {}' > hooks/benches/$b.rs; done \
 && cargo fetch --locked
COPY . .
# Make sure cargo rebuilds the real sources, not the placeholders' artifacts.
RUN touch src/main.rs src/lib.rs hooks/src/lib.rs hooks/build.rs \
 && cargo build --release --locked --bin mysql-hook

# Runtime: glibc and CA certificates only, no shell, non-root (uid 65532).
FROM gcr.io/distroless/cc-debian12:nonroot
# The path is a contract: server and Job pods run `/usr/local/bin/mysql-hook
# install-scripts` from this image (hooks::scripts::INSTALL_COMMAND).
COPY --from=build /src/target/release/mysql-hook /usr/local/bin/mysql-hook
USER 65532:65532
EXPOSE 8080
# Off loopback the hook needs MYSQL_HOOK_AUTH_TOKEN_FILE (the Deployment sets it).
ENV MYSQL_HOOK_LISTEN=0.0.0.0:8080
ENTRYPOINT ["/usr/local/bin/mysql-hook"]
CMD ["serve"]
