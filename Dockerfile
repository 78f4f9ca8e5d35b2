# A static olmv1 binary (musl) in a distroless image.
FROM rust:1.95.0-alpine AS build
RUN apk add --no-cache musl-dev cmake make perl clang
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin olmv1 && strip target/release/olmv1

FROM gcr.io/distroless/static:nonroot
COPY --from=build /src/target/release/olmv1 /olmv1
USER 65532:65532
ENTRYPOINT ["/olmv1"]
CMD ["controller"]
