module github.com/hephaestus-go/hephaestus

go 1.26.0
