# webhookd: one static binary; the same image runs `gateway`, `worker`,
# `serve`, `migrate` and the operator commands (events, replay, import).
FROM golang:1.26-bookworm AS build
WORKDIR /src
# The product alone: go.work also names the load generator's module.
ENV GOWORK=off
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/webhookd ./cmd/webhookd

FROM alpine:3.22
RUN adduser -D -H -u 10001 webhookd
COPY --from=build /out/webhookd /usr/local/bin/webhookd
COPY compose.webhookd.yaml /etc/webhookd/webhookd.yaml
USER webhookd
EXPOSE 8080
# busybox wget is in the image; /readyz answers 200 once the role's
# dependencies do (a gateway or serve: Postgres; a worker: Postgres and Redis).
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
  CMD wget -qO- http://127.0.0.1:8080/readyz >/dev/null || exit 1
ENTRYPOINT ["webhookd", "--config", "/etc/webhookd/webhookd.yaml"]
CMD ["serve"]
