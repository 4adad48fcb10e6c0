# syntax=docker/dockerfile:1
# The leasehold image: one static binary in an empty image (`FROM scratch`) with only what it
# reads besides itself, the CA certificates and a passwd entry for its non-root user, both from
# the build stage; no shell. The binary is the entrypoint so that the kubelet's SIGTERM reaches
# leasehold itself.
#
#   docker build --build-arg LEASEHOLD_BUILD_COMMIT="$(git rev-parse --short=7 HEAD)" -t leasehold:0.2.0 .
#
# The binary is linked statically, so it also runs when copied into another image, which is how
# the chart's exec mode puts a singleton command under leasehold:
#
#   COPY --from=leasehold:0.2.0 /usr/local/bin/leasehold /usr/local/bin/leasehold

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Static glibc for the platform being built; symbols stripped.
ENV RUSTFLAGS="-C target-feature=+crt-static" \
    CARGO_PROFILE_RELEASE_STRIP=symbols

# The dependencies first, in their own layer: rebuilt only when a manifest or Cargo.lock change.
# The workspace's other members (the test kit, the replica layer on it, the chaos harness, the
# model) are only for the tests: cargo needs their manifests to load the workspace, never their
# sources (an empty lib.rs stands in for each). The core's empty lib.rs stands in for it the
# same way, so that its dependencies are built in this layer too.
COPY Cargo.toml Cargo.lock ./
COPY crates/core/Cargo.toml ./crates/core/
COPY crates/testbed/Cargo.toml ./crates/testbed/
COPY crates/harness/Cargo.toml ./crates/harness/
COPY crates/chaos/Cargo.toml ./crates/chaos/
COPY crates/model/Cargo.toml ./crates/model/
RUN mkdir -p src crates/core/src crates/testbed/src crates/harness/src crates/chaos/src crates/model/src \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs crates/core/src/lib.rs crates/testbed/src/lib.rs crates/harness/src/lib.rs crates/chaos/src/lib.rs \
    crates/model/src/lib.rs \
 && cargo build --release --locked --target "$(uname -m)-unknown-linux-gnu" --bin leasehold \
 && rm -rf src crates/core/src

# Then leasehold itself and its core. COPY keeps the files' old mtimes; touch them so cargo rebuilds the crate
# instead of reusing the stub's. The context holds no .git, so build.rs learns the commit that
# `leasehold --version` names from this argument, and says it is unknown without it:
#   docker build --build-arg LEASEHOLD_BUILD_COMMIT="$(git rev-parse --short=7 HEAD)" …
ARG LEASEHOLD_BUILD_COMMIT=""
COPY build.rs ./
COPY src ./src
COPY crates/core/src ./crates/core/src
RUN touch src/main.rs src/lib.rs crates/core/src/lib.rs \
 && cargo build --release --locked --target "$(uname -m)-unknown-linux-gnu" --bin leasehold \
 && cp "target/$(uname -m)-unknown-linux-gnu/release/leasehold" /leasehold

# The image's only user and group, for the final stage, which has no shell to make them.
RUN echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' > passwd \
 && echo 'nonroot:x:65532:' > group

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /src/passwd /etc/passwd
COPY --from=build /src/group /etc/group
COPY --from=build /leasehold /usr/local/bin/leasehold
LABEL org.opencontainers.image.title="leasehold" \
      org.opencontainers.image.version="0.2.0" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/leasehold"]
CMD ["run"]
