module github.com/hephaestus-go/hephaestus

go 1.26.0

require github.com/google/uuid v1.6.0
