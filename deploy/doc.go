// Package deploy holds what runs feedmesh where ML teams run it: the
// container image's build (image/build.sh, image/mkimage), the Helm chart
// (helm/feedmesh), a systemd unit for bare-metal nodes (systemd/) and
// examples (examples/). Its tests build the image and run its binary from
// the image's own root filesystem, and render the chart and decode every
// object strictly into the Kubernetes API's types (deploy/README.md).
package deploy
