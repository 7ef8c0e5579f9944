module github.com/google/uuid

go 1.26.0
