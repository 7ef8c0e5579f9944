module example.com/app

go 1.26.0

require (
	github.com/google/uuid v0.0.0
	github.com/hephaestus-go/hephaestus v0.0.0
)

replace (
	github.com/google/uuid => ./uuid
	github.com/hephaestus-go/hephaestus => ./heph
)
