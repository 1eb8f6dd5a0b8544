# syntax=docker/dockerfile:1
# Multi-stage build of the operator: a Rust builder, then a small non-root runtime
# image holding only the binary (TLS roots come with the distroless base).

FROM rust:1.89-bookworm AS builder
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin mongodb-member-operator \
 && cp target/release/mongodb-member-operator /usr/local/bin/

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /usr/local/bin/mongodb-member-operator /usr/local/bin/mongodb-member-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mongodb-member-operator"]
