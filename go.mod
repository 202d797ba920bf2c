module github.com/actorfeed/actorfeed

go 1.26

require (
	github.com/klauspost/compress v1.20.3
	github.com/stretchr/testify v1.12.1
	github.com/x448/float16 v0.8.4
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
