module github.com/olmv1-rs/olmv1/hack/testimage

go 1.26.0
