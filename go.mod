module github.com/actorfeed/actorfeed

go 1.26

require (
	github.com/klauspost/compress v1.20.3
	github.com/spf13/cobra v1.10.2
	github.com/stretchr/testify v1.12.1
	github.com/x448/float16 v0.8.4
	go.uber.org/goleak v1.3.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
