// Package anthropic is a Provider for the Anthropic Messages API.
package anthropic

import _ "github.com/anthropics/anthropic-sdk-go"
