module bindery.test/clients/promtext

go 1.24.0

require (
	github.com/prometheus/client_model v0.6.1
	github.com/prometheus/common v0.62.0
)

require (
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	google.golang.org/protobuf v1.36.1 // indirect
)
